#pragma once
// Helpers of the torch-only tests; the cases every backend runs are in shared_cases.h.
#include <gtest/gtest.h>

#include <string>

#include "shared_cases.h"

namespace d5::test {

// The reason torch gives for refusing the spec ("accepts" when it takes it).
inline std::string torch_refusal(const OpSpec& s) {
  register_builtin_operators();
  for (const auto& r : OpRegistry::global().explain(s, "torch"))
    if (r.implementation == "torch") return r.reason;
  return "no torch implementation";
}

}  // namespace d5::test
