// d5 compare: two result files case by case; a regression gate for CI (exit 1 on SLOWER).
#include <filesystem>

#include "cli_common.h"
#include "deep500/metrics/compare.h"
#include "deep500/experiment/recipe_run.h"

namespace d5::cli {

namespace {

struct CompareOpts {
  OutputOptions out;
  std::string baseline, candidate;
  CompareOptions cmp;
  bool lower_better = false, higher_better = false, fail_on_uncertain = false, fail_on_missing = false;
};

int run_compare(CompareOpts o) {
  if (o.lower_better) o.cmp.direction = Direction::LowerIsBetter;
  if (o.higher_better) o.cmp.direction = Direction::HigherIsBetter;
  // Two recipe runs (run.json) compare run by run, through the result files beside them.
  const auto load = [](const std::string& path) {
    Results r = read_results(path);
    return is_recipe_run(r) ? recipe_run_cases(r, std::filesystem::path(path).parent_path().string()) : r;
  };
  const Comparison c = compare_results(load(o.baseline), load(o.candidate), o.cmp);
  nlohmann::json j = to_json(c);
  j["baseline"] = o.baseline;
  j["new"] = o.candidate;
  emit_text(format_comparison(c), j, o.out);
  const bool failed = c.count(Verdict::Slower) > 0 || (o.fail_on_uncertain && c.count(Verdict::Uncertain) > 0) ||
                      (o.fail_on_missing && (!c.only_in_a.empty() || !c.only_in_b.empty()));
  return failed ? kExitFailed : kExitOk;
}

}  // namespace

Command register_compare(CLI::App& app, const GlobalOptions&) {
  auto* cmd = app.add_subcommand(
      "compare",
      "Compare two result files case by case: ratio with its CI, Mann-Whitney p, FASTER/SLOWER/SAME/UNCERTAIN; "
      "exit 1 when a case is SLOWER");
  auto o = std::make_shared<CompareOpts>();
  cmd->add_option("baseline", o->baseline, "The baseline result file (A.json), or a recipe run's run.json")->required()->check(CLI::ExistingFile);
  cmd->add_option("new", o->candidate, "The new result file (B.json); ratios are new / baseline")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("--metric", o->cmp.metric, "Metric to compare (default: each case's primary metric)");
  cmd->add_option("--level", o->cmp.level, "Confidence level of the ratio CI")
      ->check(CLI::Range(0.5, 0.9999))
      ->default_val(0.95);
  add_verdict_options(*cmd, o->cmp);
  auto* lower = cmd->add_flag("--lower-is-better", o->lower_better, "The metric is a cost (default: from its unit)");
  cmd->add_flag("--higher-is-better", o->higher_better, "The metric is a rate (default: from its unit)")
      ->excludes(lower);
  cmd->add_flag("--fail-on-uncertain", o->fail_on_uncertain, "Exit 1 also when a case is UNCERTAIN");
  cmd->add_flag("--fail-on-missing", o->fail_on_missing, "Exit 1 also when a case is in only one of the files");
  add_output_options(*cmd, o->out);
  return {cmd, [o] { return run_compare(*o); }};
}

}  // namespace d5::cli
