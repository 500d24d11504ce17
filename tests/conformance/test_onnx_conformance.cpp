// Checks `d5 onnx-test` on ONNX's generated node cases (fixture onnx_cases): every case is
// accounted for, and every case whose operators are all registered on the reference backend
// passes, is listed as a known failure, or is skipped by the runner with a reason.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "../integration/process.h"
#include "deep500/backends/builtin.h"
#include "deep500/onnx/onnx_conformance.h"
#include "deep500/op/op_registry.h"

namespace d5::test {

namespace {

const nlohmann::json& conformance_run() {
  static const nlohmann::json j = [] {
    const auto r = run_d5({"onnx-test", D5_ONNX_CASES, "--backend", "reference", "--format", "json",
                           "--exceptions", D5_ONNX_EXCEPTIONS});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return nlohmann::json::parse(r.out);
  }();
  return j;
}

}  // namespace

TEST(OnnxConformance, EveryGeneratedCaseIsReported) {
  const auto& j = conformance_run();
  size_t dirs = 0;
  for (const auto& e : std::filesystem::directory_iterator(D5_ONNX_CASES))
    dirs += std::filesystem::exists(e.path() / "model.onnx");
  EXPECT_GT(dirs, 500u);
  EXPECT_EQ(j["summary"]["total"], dirs);
  EXPECT_EQ(j["cases"].size(), dirs);
  const auto& s = j["summary"];
  EXPECT_EQ(s["passed"].get<int>() + s["failed"].get<int>() + s["skipped"].get<int>() + s["unimplemented"].get<int>(),
            s["total"].get<int>());
  EXPECT_EQ(s["failed"], 0);
  EXPECT_TRUE(s["unexpectedly_passing"].empty()) << s["unexpectedly_passing"].dump();
}

TEST(OnnxConformance, CasesOfImplementedOperatorsPass) {
  register_builtin_operators();
  const auto exceptions = read_conformance_exceptions(D5_ONNX_EXCEPTIONS);
  int checked = 0;
  for (const auto& c : conformance_run()["cases"]) {
    const auto ops = c["ops"].get<std::vector<std::string>>();
    const bool implemented = !ops.empty() && std::all_of(ops.begin(), ops.end(), [](const std::string& op) {
      return !OpRegistry::global().implementations(op, "reference").empty();
    });
    if (!implemented || exceptions.count(c["name"])) continue;
    ++checked;
    const std::string state = c["state"];
    // The runner's own skips (16-bit floats, strings, sequences) say why; everything else passes.
    if (state == "SKIPPED") EXPECT_FALSE(c["detail"].get<std::string>().empty()) << c.dump();
    else EXPECT_EQ(state, "PASSED") << c.dump();
  }
  EXPECT_GT(checked, 0);
}

TEST(OnnxConformance, UnaryFamilyPasses) {
  std::map<std::string, std::string> state;
  for (const auto& c : conformance_run()["cases"]) state[c["name"]] = c["state"];
  for (const char* name : {"test_relu", "test_sigmoid", "test_tanh", "test_abs", "test_neg", "test_exp", "test_log",
                           "test_sqrt", "test_reciprocal", "test_elu", "test_selu", "test_leakyrelu",
                           "test_hardsigmoid", "test_softplus", "test_clip", "test_clip_default_int8_min"})
    EXPECT_EQ(state[name], "PASSED") << name;
}

}  // namespace d5::test
