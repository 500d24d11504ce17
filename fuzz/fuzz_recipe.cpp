// Recipe YAML (`d5 run`): parse_recipe, then plan_runs (grids, seeds, division rules, the d5 command
// lines a recipe expands to). With selector bit 1 the input's first line is a `--set` override
// (parse_overrides) and the rest the recipe.
#include <cstdint>
#include <string>

#include "deep500/experiment/recipe.h"
#include "fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const d5::fuzz::Selected in = d5::fuzz::select(data, size);
  const uint8_t selector = in.selector;
  const std::span<const uint8_t> rest = in.rest;
  std::string text(reinterpret_cast<const char*>(rest.data()), rest.size());
  std::vector<std::string> set;
  if (selector & 1) {
    const size_t nl = text.find('\n');
    set.push_back(text.substr(0, nl));
    text = nl == std::string::npos ? std::string() : text.substr(nl + 1);
  }
  d5::fuzz::accepts([&] {
    const d5::Recipe recipe = d5::parse_recipe(text, "fuzz.yaml");
    const std::vector<d5::Override> overrides = d5::parse_overrides(set);
    const auto runs = d5::plan_runs(recipe, overrides, 1);
    for (const auto& r : runs) {
      d5::fuzz::require(r.entry < recipe.entries.size(), "planned run of an entry the recipe does not have");
      std::vector<std::string> args = r.args;
      d5::add_result_file_options(args, "out.json");
    }
  });
  return 0;
}
