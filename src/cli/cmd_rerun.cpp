// d5 rerun: an experiment run again from the manifest of its result file, and the new result
// compared with the old one: timings with d5 compare's statistics, outputs bit for bit.
#include <filesystem>
#include <iostream>

#include <fmt/format.h>

#include "cli_common.h"
#include "deep500/core/build_info.h"
#include "deep500/metrics/compare.h"
#include "deep500/core/error.h"
#include "recipe_cli.h"

namespace d5::cli {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct RerunOpts {
  OutputOptions out;
  std::string result, into;
  CompareOptions cmp;
  bool outputs_only = false;
};

// Metrics and facts that are a run's outputs rather than its timings: with fixed seeds and
// deterministic algorithms they must repeat exactly.
// Test-pass measures are every "test_<measure>" metric and "final_test_<measure>" fact.
bool output_metric(const std::string& name) {
  return name == "loss" || name == "training_accuracy" || name.starts_with("test_");
}
bool output_fact(const std::string& key) { return key == "final_loss" || key == "steps" || key.starts_with("final_test_"); }

struct OutputCheck {
  int cases = 0, identical = 0;
  std::vector<std::string> differences;
};

void check_outputs(const Results& a, const Results& b, OutputCheck& check) {
  for (const auto& ca : a.cases) {
    for (const auto& cb : b.cases) {
      if (cb.name != ca.name || cb.backend != ca.backend) continue;
      bool any = false, same = true;
      for (const auto& metric : ca.metrics) {
        const std::string& name = metric.name;
        if (!output_metric(name)) continue;
        const auto find = [&](const CaseResult& c) -> const MetricRecord* {
          for (const auto& m : c.metrics)
            if (m.name == name) return &m;
          return nullptr;
        };
        const MetricRecord *ma = find(ca), *mb = find(cb);
        if (!ma || !mb) continue;
        any = true;
        if (ma->samples != mb->samples) {
          same = false;
          size_t i = 0;
          while (i < std::min(ma->samples.size(), mb->samples.size()) && ma->samples[i] == mb->samples[i]) ++i;
          check.differences.push_back(
              i < std::min(ma->samples.size(), mb->samples.size())
                  ? fmt::format("{} @ {}: {} sample {} is {:.17g}, was {:.17g}", ca.name, ca.backend, name, i,
                                mb->samples[i], ma->samples[i])
                  : fmt::format("{} @ {}: {} has {} samples, had {}", ca.name, ca.backend, name, mb->samples.size(),
                                ma->samples.size()));
        }
      }
      for (const auto& [key, value] : ca.extra.items()) {
        if (!output_fact(key) || !cb.extra.contains(key)) continue;
        any = true;
        if (value != cb.extra[key]) {
          same = false;
          check.differences.push_back(fmt::format("{} @ {}: {} is {}, was {}", ca.name, ca.backend, key,
                                                  cb.extra[key].dump(), value.dump()));
        }
      }
      if (any) {
        ++check.cases;
        check.identical += same;
      }
    }
  }
}

// The recorded command line without its output options, which the rerun replaces.
std::vector<std::string> rerun_args(const json& manifest, const std::string& path) {
  D5_CHECK(manifest.contains("command_line") && manifest["command_line"].is_array() &&
               manifest["command_line"].size() >= 2,
           FormatError, "'{}' has no command line in its manifest to rerun", path);
  const auto argv = manifest["command_line"].get<std::vector<std::string>>();
  return without_result_file_options({argv.begin() + 1, argv.end()});
}

std::string default_into(const std::string& result, bool recipe) {
  const fs::path p(result);
  if (recipe) return fs::absolute(p).parent_path().string() + "-rerun";
  return (p.parent_path() / (p.stem().string() + ".rerun.json")).string();
}

// The CPU set a manifest's process could run on ("0-3"); empty when it does not say.
std::string allowed_cpus_of(const json& manifest) {
  const auto threads = manifest.find("threads");
  if (threads == manifest.end() || !threads->is_object()) return "";
  const auto cpus = threads->find("allowed_cpus");
  return cpus != threads->end() && cpus->is_string() ? cpus->get<std::string>() : "";
}

int run_rerun(const RerunOpts& o, const GlobalOptions& g) {
  const Results old = read_results(o.result);
  const json& manifest = old.manifest;
  const bool recipe_run = is_recipe_run(old);
  const std::string into = o.into.empty() ? default_into(o.result, recipe_run) : o.into;
  const bool deterministic = manifest.value("deterministic", false);

  Results before, after;
  std::string where;
  if (recipe_run) {
    const json& r = manifest["extra"]["recipe"];
    const Recipe recipe = parse_recipe(r.at("text").get<std::string>(), r.value("source", o.result));
    GlobalOptions rg = g;
    rg.seed = manifest.at("seeds").at("master").get<uint64_t>();
    rg.threads = manifest.contains("threads") ? manifest["threads"].value("requested", 0) : 0;
    rg.deterministic = deterministic;
    rg.math = manifest.value("f32_math", std::string("strict"));
    RecipeRunOptions ro;
    ro.results_dir = into;
    const ExecutedRecipe done =
        execute_recipe(recipe, r.value("overrides", std::vector<std::string>{}), rg, ro, o.out.format != "json");
    before = recipe_run_cases(old, fs::path(o.result).parent_path().string());
    after = recipe_run_cases(done.summary, into);
    where = done.summary_path;
  } else {
    std::vector<std::string> args = rerun_args(manifest, o.result);
    add_result_file_options(args, into);
    const std::string log = into + ".log";
    const ProcessOutcome p = run_process(self_executable(), args, log);
    D5_CHECK(fs::exists(into), IoError, "the rerun 'd5 {}' exited {} without a result file (log: {})",
             fmt::join(args, " "), p.exit_code, log);
    before = old;
    after = read_results(into);
    where = into;
  }

  const Comparison cmp = compare_results(before, after, o.cmp);
  OutputCheck outputs;
  check_outputs(before, after, outputs);
  const std::string old_rev = manifest.value("git_revision", "");
  // A modified tree's revision does not pin the build down; say so rather than claim a match.
  const bool old_dirty = manifest.value("git_dirty", false);
  const bool same_build = old_rev == build_info().git_revision && !old_dirty && !build_info().git_dirty;
  // On another machine, or a loaded one, times are expected to move; outputs are not.
  const bool times_agree = o.outputs_only || (cmp.count(Verdict::Faster) == 0 && cmp.count(Verdict::Slower) == 0);
  const bool outputs_agree = !deterministic || outputs.differences.empty();
  const bool reproduced = times_agree && outputs_agree;

  std::string text = format_comparison(cmp);
  text += fmt::format("outputs: {} of {} case(s) bitwise identical (loss, accuracies, steps){}\n", outputs.identical,
                      outputs.cases, deterministic ? "" : "; the original was not --deterministic");
  for (const auto& d : outputs.differences) text += "    " + d + "\n";
  if (o.outputs_only) text += "times: shown, not judged (--outputs-only)\n";
  if (old_rev != build_info().git_revision)
    text += fmt::format("note: the original ran on build {}, this is {}\n", old_rev.substr(0, 12),
                        build_info().git_revision.substr(0, 12));
  else if (!same_build)
    text += fmt::format("note: build {} from a modified tree; the two builds may differ\n", old_rev.substr(0, 12));
  // A binding (taskset, a cpuset) changes times and is not a d5 option the rerun could repeat.
  const std::string old_cpus = allowed_cpus_of(manifest), new_cpus = allowed_cpus_of(after.manifest);
  const bool cpus_differ = !old_cpus.empty() && !new_cpus.empty() && old_cpus != new_cpus;
  if (cpus_differ)
    text += fmt::format("note: the original ran on cpus {}, this rerun on cpus {}: bind it as the original was "
                        "(taskset -c {} d5 rerun ...)\n", old_cpus, new_cpus, old_cpus);
  text += fmt::format("{}: {} (rerun in {})\n", o.result, reproduced ? "REPRODUCED" : "NOT REPRODUCED", where);
  json j = {{"schema", "deep500.rerun"},
            {"schema_version", 1},
            {"original", o.result},
            {"rerun", where},
            {"same_build", same_build},
            {"deterministic", deterministic},
            {"times_judged", !o.outputs_only},
            {"comparison", to_json(cmp)},
            {"outputs", {{"cases", outputs.cases}, {"identical", outputs.identical}, {"differences", outputs.differences}}},
            {"verdict", reproduced ? "REPRODUCED" : "NOT REPRODUCED"}};
  if (cpus_differ) j["cpus"] = {{"original", old_cpus}, {"rerun", new_cpus}};
  emit_text(text, j, o.out);
  return reproduced ? kExitOk : kExitFailed;
}

}  // namespace

Command register_rerun(CLI::App& app, const GlobalOptions& g) {
  auto* cmd = app.add_subcommand(
      "rerun", "Run an experiment again from its result file's manifest and compare: timings (as d5 compare) and "
               "outputs bit for bit; exit 1 when not reproduced");
  auto o = std::make_shared<RerunOpts>();
  cmd->add_option("result", o->result, "A result file, or a recipe run's run.json")->required()->check(CLI::ExistingFile);
  cmd->add_option("--into", o->into,
                  "Where the new result goes (default: RESULT.rerun.json, or DIR-rerun/ for a recipe run)");
  add_verdict_options(*cmd, o->cmp);
  cmd->add_flag("--outputs-only", o->outputs_only,
               "Judge only the outputs (loss, accuracies, steps); times are compared and shown but cannot fail the "
               "rerun, as on a different or loaded machine");
  add_output_options(*cmd, o->out);
  return {cmd, [o, &g] { return run_rerun(*o, g); }};
}

}  // namespace d5::cli
