// d5 models: the model zoo. `d5 models list` builds every model at batch 1 with its default input
// and prints its parameter count and the work of one forward pass.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli_common.h"
#include "deep500/model_zoo.h"
#include "deep500/op_registry.h"

namespace d5::cli {

namespace {
using nlohmann::json;

// 11689512 -> "11,689,512"
std::string with_separators(int64_t v) {
  std::string digits = std::to_string(v), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

int run_list(const OutputOptions& out) {
  register_builtin_operators();  // shape inference and flops() come from the reference operators
  json models = json::array();
  std::string text = fmt::format("{:<14}{:>13}  {:<12}{:>9}  {}\n", "model", "parameters", "input", "GFLOPs",
                                 "description");
  for (const auto& m : zoo_models()) {
    ModelOptions o;
    o.initialize = false;  // counting needs the shapes, not the values
    const Network net = build_model(m.name, o);
    const int64_t params = net.parameter_count();
    const double gflops = forward_flops(net) / 1e9;
    const std::string input = fmt::format("{}", fmt::join(m.default_input, "x"));
    text += fmt::format("{:<14}{:>13}  {:<12}{:>9.4g}  {}\n", m.name, with_separators(params), input, gflops,
                        m.description);
    models.push_back({{"name", m.name},
                      {"description", m.description},
                      {"parameters", params},
                      {"default_input", m.default_input},
                      {"default_classes", m.default_classes},
                      {"forward_gflops_batch1", gflops}});
  }
  text += "GFLOPs: one forward pass at batch 1 (a multiply-add counts 2), from the operators' flops()\n";
  emit_text(text, json{{"models", models}}, out);
  return kExitOk;
}

}  // namespace

Command register_models(CLI::App& app, const GlobalOptions& /*g*/) {
  auto* models = app.add_subcommand("models", "Level 1: the model zoo (list)");
  models->require_subcommand(1);
  auto* list = models->add_subcommand("list", "Every zoo model: parameters, default input, GFLOPs of one forward");
  auto out = std::make_shared<OutputOptions>();
  add_output_options(*list, *out);
  return {models, [list, out]() -> int {
            if (list->parsed()) return run_list(*out);
            return kExitUsage;
          }};
}

}  // namespace d5::cli
