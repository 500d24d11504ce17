// At the end of the shared cases: the tally per backend, and a failure for any operator type a
// backend registers that no case exercised (a new operator must come with cases).
#include <gtest/gtest.h>

#include <cstdio>

#include "shared_cases.h"

namespace d5::test {
namespace {

class SharedCaseReport : public ::testing::Environment {
 public:
  void TearDown() override {
    for (const auto& [backend, why] : unavailable_case_backends())
      std::printf("shared operator cases on %s: NOT RUN, the backend is unavailable here: %s\n", backend.c_str(),
                  why.c_str());
    for (const auto& backend : case_backends()) {
      const auto& b = case_tally().backends[backend];
      std::printf("shared operator cases on %s: %d PASSED, %d FAILED, %d UNIMPLEMENTED\n", backend.c_str(), b.passed,
                  b.failed, b.unimplemented);
      for (const auto& [type, why] : b.refusals)
        if (!b.types_checked.count(type)) std::printf("  UNIMPLEMENTED %s: %s\n", type.c_str(), why.c_str());
      // Only a run of every case can say which types went untested.
      if (::testing::GTEST_FLAG(filter) != "*") continue;
      for (const auto& type : OpRegistry::global().op_types())
        if (!OpRegistry::global().implementations(type, backend).empty() && !b.types_checked.count(type))
          ADD_FAILURE() << backend << " implements " << type << " but no shared case ran it: add one to cases_*.cpp";
    }
  }
};

[[maybe_unused]] auto* const kReport = ::testing::AddGlobalTestEnvironment(new SharedCaseReport);

}  // namespace
}  // namespace d5::test
