// d5 tune: hyper-parameter search over a recipe entry's mutable options (docs/tune.md). Random
// search or asynchronous successive halving over a resource (epochs), every trial a child d5 with
// its result file kept, the best configuration written back as a recipe, and the search's cost
// (wall time, node-hours, energy where RAPL is readable) set beside what it bought.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "cli_common.h"
#include "deep500/core/error.h"
#include "deep500/core/parse_number.h"
#include "deep500/metrics/energy.h"
#include "deep500/metrics/manifest.h"
#include "deep500/metrics/statistics.h"
#include "recipe_cli.h"
#include "tune_trial.h"

namespace d5::cli {

namespace {

namespace fs = std::filesystem;

struct TuneOpts {
  OutputOptions out;
  std::string recipe, entry, results_dir, write_recipe, budget, method = "asha", resource, objective;
  std::vector<std::string> sets, space;
  double eta = 3, min_resource = 1, max_resource = 0, early_stop = 1.5, price = 0;
  bool maximize = false, no_baseline = false;
  int slots = 1, nodes = 1, confirm_seeds = 0;
};

// "20": trials; "90s", "15m", "2h": time; "20,15m": both, whichever ends first.
void parse_budget(const std::string& text, TunerOptions& o) {
  std::stringstream items(text);
  for (std::string item; std::getline(items, item, ',');) {
    if (const auto n = parse_int(item)) {
      D5_CHECK_ARG(*n > 0, "--budget {}: a number of trials is at least 1", text);
      o.max_trials = *n;
      continue;
    }
    const char unit = item.empty() ? '\0' : item.back();
    const double scale = unit == 's' ? 1 : unit == 'm' ? 60 : unit == 'h' ? 3600 : 0;
    const auto v = scale > 0 ? parse_double(item.substr(0, item.size() - 1)) : std::nullopt;
    D5_CHECK_ARG(v && *v > 0, "--budget '{}': write a number of trials (20), a time (90s, 15m, 2h) or both (20,15m)",
                 text);
    o.time_budget_s = *v * scale;
  }
  D5_CHECK_ARG(o.max_trials > 0 || o.time_budget_s > 0, "--budget '{}' names neither trials nor a time", text);
}

size_t pick_entry(const Recipe& r, const std::string& name) {
  if (!name.empty()) {
    for (size_t i = 0; i < r.entries.size(); ++i)
      if (r.entries[i].name == name) return i;
    D5_THROW(InvalidArgument, "recipe '{}' has no entry '{}'", r.name, name);
  }
  std::vector<size_t> searchable;
  for (size_t i = 0; i < r.entries.size(); ++i)
    if (!r.entries[i].search.empty()) searchable.push_back(i);
  if (searchable.size() == 1) return searchable.front();
  if (r.entries.size() == 1) return 0;
  D5_THROW(InvalidArgument, "recipe '{}' has {} entries{}: name the one to tune with --entry", r.name,
           r.entries.size(), searchable.empty() ? "" : fmt::format(", {} with a search map", searchable.size()));
}

bool has_target(const RecipeEntry& e) {
  for (const char* k : {"target", "target-accuracy"})
    if (e.fixed.contains(k) || e.mutable_params.contains(k)) return true;
  return false;
}

TuneObjective pick_objective(const RecipeEntry& e, const TuneOpts& o) {
  TuneObjective obj;
  obj.quantity = o.objective.empty() ? (has_target(e) ? "time_to_target" : "") : o.objective;
  D5_CHECK_ARG(!obj.quantity.empty(),
               "entry '{}' trains to no quality target: name what to minimize with --objective QUANTITY (or maximize "
               "with --maximize)",
               e.name);
  parse_criterion(obj.quantity + " reached");  // the names criteria take
  obj.to_target = obj.quantity == "time_to_target" || obj.quantity == "steps_to_target";
  D5_CHECK_ARG(!obj.to_target || has_target(e), "--objective {}: entry '{}' names no target", obj.quantity, e.name);
  D5_CHECK_ARG(!(obj.to_target && o.maximize), "--maximize: {} is minimized", obj.quantity);
  obj.lower_is_better = !o.maximize;
  return obj;
}

// The entry alone, its seeds one (d5's --seed): trials differ in their configuration only.
Recipe single_entry(const Recipe& r, size_t entry, const SeedPlan& seeds) {
  Recipe one = r;
  one.entries = {r.entries[entry]};
  one.entries.front().seeds = seeds;
  one.criteria.clear();
  return one;
}

double resource_value(const RecipeEntry& e, const std::string& key, const std::vector<Override>& sets) {
  std::optional<double> v;
  if (e.mutable_params.contains(key) && e.mutable_params[key].is_number()) v = e.mutable_params[key].get<double>();
  for (const auto& s : sets)
    if (s.key == key && (s.entry.empty() || s.entry == e.name)) v = parse_double(s.value);
  D5_CHECK_ARG(v && *v > 0, "entry '{}' has no numeric mutable '{}' to use as the resource: name one with --resource, "
               "or give --max-resource", e.name, key);
  return *v;
}

std::string config_text(const Params& c) {
  std::vector<std::string> parts;
  for (const auto& [k, v] : c.items()) parts.push_back(k + "=" + (v.is_string() ? v.get<std::string>() : v.dump()));
  return fmt::format("{}", fmt::join(parts, " "));
}

std::string value_text(const TuneObjective& o, double value) {
  const double v = o.lower_is_better ? value : -value;
  return o.quantity == "time_to_target" ? fmt::format("{:.3f} s", v) : fmt::format("{:.6g}", v);
}

}  // namespace

namespace {

// The shipped and the tuned configuration, each over `seeds` seeds: the search ranked single runs,
// this says whether the difference survives seed noise (Mann-Whitney; a seed that never reached
// the target counts as slower than every one that did).
nlohmann::json confirm(const Recipe& recipe, size_t entry, const Params& best, const TuneOpts& o,
                       const GlobalOptions& g, const TuneObjective& objective, double search_wall_s, std::string& text) {
  SeedPlan plan;
  plan.count = o.confirm_seeds;
  const Recipe one = single_entry(recipe, entry, plan);
  nlohmann::json out = nlohmann::json::object();
  std::vector<double> samples[2];
  const char* names[2] = {"shipped", "tuned"};
  for (int which = 0; which < 2; ++which) {
    std::vector<std::string> sets = o.sets;
    if (which == 1)
      for (const auto& [k, v] : best.items())
        sets.push_back(fmt::format("{}.{}={}", one.entries.front().name, k, v.is_string() ? v.get<std::string>() : v.dump()));
    RecipeRunOptions ro;
    ro.results_dir = (fs::path(o.results_dir) / (std::string("confirm-") + names[which])).string();
    const ExecutedRecipe done = execute_recipe(one, sets, g, ro, o.out.format != "json");
    size_t reached = 0, runs = 0;
    for (const auto& group : done.solutions)
      for (const auto& s : group.seeds) {
        ++runs;
        reached += s.reached ? 1 : 0;
        const double v = objective.quantity == "steps_to_target" ? static_cast<double>(s.steps_to_target)
                                                                  : s.time_to_target_s;
        samples[which].push_back(s.reached ? v : std::numeric_limits<double>::infinity());
      }
    D5_CHECK_ARG(runs > 0, "the confirmation runs of entry '{}' name no quality target", one.entries.front().name);
    std::vector<double> finite;
    for (double v : samples[which])
      if (std::isfinite(v)) finite.push_back(v);
    const auto median = median_counting_failures(finite, runs);
    nlohmann::json j = {{"results_dir", ro.results_dir}, {"seeds", runs},        {"reached", reached},
                        {"samples", finite},        {"wall_s", done.run.wall_s}};
    std::string line = fmt::format("  {:<8} {}/{} seeds reached the target", names[which], reached, runs);
    if (median) {
      j["median"] = *median;
      line += fmt::format(", median {}", value_text(objective, *median));
    }
    if (finite.size() == runs) {
      const Summary s = summarize(finite);
      if (s.median_ci.available) {
        j["median_ci"] = {s.median_ci.lower, s.median_ci.upper};
        line += fmt::format(", 95% CI [{}, {}]", value_text(objective, s.median_ci.lower),
                            value_text(objective, s.median_ci.upper));
      }
    }
    text += line + "\n";
    out[names[which]] = j;
  }
  const MannWhitneyResult mw = mann_whitney_u(samples[1], samples[0]);
  const bool faster = mw.p_value < 0.05 && mw.u_x < mw.u_y;
  out["mann_whitney_p"] = mw.p_value;
  out["verdict"] = faster ? "FASTER" : mw.p_value < 0.05 ? "SLOWER" : "NOT SIGNIFICANT";
  text += fmt::format("  tuned against shipped: {} (Mann-Whitney p = {:.3g}); the confirmation took {:.1f} s\n",
                      out["verdict"].get<std::string>(), mw.p_value,
                      out["shipped"]["wall_s"].get<double>() + out["tuned"]["wall_s"].get<double>());
  if (faster && objective.quantity == "time_to_target" && out["shipped"].contains("median") &&
      out["tuned"].contains("median")) {
    const double saved = out["shipped"]["median"].get<double>() - out["tuned"]["median"].get<double>();
    out["saved_per_run_s"] = saved;
    out["search_pays_after_runs"] = std::ceil(search_wall_s / saved);
    text += fmt::format("  by the medians: {:.3f} s less training per run; the search pays for itself after {:.0f} "
                        "runs\n", saved, std::ceil(search_wall_s / saved));
  }
  return out;
}

struct SearchCost {
  double wall_s = 0, node_hours = 0, trial_process_s = 0, price = 0;
  std::optional<double> energy_j;
  std::string energy_note;
};

nlohmann::json to_json(const SearchCost& c) {
  nlohmann::json j = {{"wall_s", c.wall_s}, {"node_hours", c.node_hours}, {"trial_process_s", c.trial_process_s}};
  if (c.price > 0) j["price"] = c.price;
  j["energy_j"] = c.energy_j ? nlohmann::json(*c.energy_j) : nlohmann::json();
  if (!c.energy_note.empty()) j["energy"] = c.energy_note;
  return j;
}

Results tune_results(const TuningResult& t, const TuneObjective& objective, nlohmann::json manifest) {
  Results res;
  res.manifest = std::move(manifest);
  for (const auto& d : t.evaluations) {
    CaseResult c;
    c.name = evaluation_id(d.evaluation, d.baseline);
    c.level = "tune";
    c.params = nlohmann::json::parse(d.evaluation.config.dump());
    c.state = d.result.tier == 2 ? CaseState::Failed : CaseState::Passed;
    c.detail = d.result.detail;
    c.extra = d.result.record;
    c.extra["trial"] = d.evaluation.trial;
    c.extra["baseline"] = d.baseline;
    c.extra["rung"] = d.evaluation.rung;
    c.extra["resource"] = d.evaluation.resource;
    c.extra["complete"] = d.complete;
    c.extra["final"] = d.result.final;
    c.extra["tier"] = d.result.tier;
    if (d.result.tier == 0) c.extra["objective"] = objective.lower_is_better ? d.result.value : -d.result.value;
    c.extra["started_s"] = d.started_s;
    c.extra["finished_s"] = d.finished_s;
    res.cases.push_back(std::move(c));
  }
  return res;
}

std::string evaluations_table(const TuningResult& t, const std::string& resource_key) {
  std::string s = fmt::format("{:<15} {:>9}  {:<40} {}\n", "evaluation", resource_key, "configuration", "outcome");
  for (const auto& d : t.evaluations)
    s += fmt::format("{:<15} {:>9g}  {:<40} {}\n", evaluation_id(d.evaluation, d.baseline), d.evaluation.resource,
                     d.baseline ? "(the recipe's values)" : config_text(d.evaluation.config), d.result.detail);
  return s;
}

}  // namespace

namespace {

// The searched options' values in the recipe (after --set): the baseline configuration.
Params recipe_values(const RecipeEntry& e, const SearchSpace& space, const std::vector<Override>& sets) {
  Params p = Params::object();
  for (const auto& d : space) {
    p[d.key] = e.mutable_params[d.key];
    for (const auto& s : sets)
      if (s.key == d.key && (s.entry.empty() || s.entry == e.name)) p[d.key] = parse_override_value(s.value);
  }
  return p;
}

std::string summary_text(const TuningResult& t, const TuneObjective& obj, const SearchCost& cost, int nodes) {
  std::string s;
  const auto& ev = t.evaluations;
  if (t.best)
    s += fmt::format("best: {} ({}): {} {}\n", evaluation_id(ev[*t.best].evaluation, ev[*t.best].baseline),
                     config_text(ev[*t.best].evaluation.config), obj.quantity, value_text(obj, ev[*t.best].result.value));
  else
    s += fmt::format("best: none; no configuration {}\n", obj.to_target ? "reached the target" : "was measured");
  const bool baseline_measured = t.baseline && ev[*t.baseline].result.tier == 0;
  if (t.baseline)
    s += fmt::format("the recipe's values: {}\n", baseline_measured
                                                     ? fmt::format("{} {}", obj.quantity,
                                                                   value_text(obj, ev[*t.baseline].result.value))
                                                     : ev[*t.baseline].result.detail);
  s += fmt::format("search cost: {:.1f} s wall ({} evaluations of {} configurations, stopped by {}), {:.4f} node-hours "
                   "on {} node(s), {:.1f} s in trial processes",
                   cost.wall_s, ev.size(), t.trials_drawn, t.stop_reason, cost.node_hours, nodes, cost.trial_process_s);
  s += cost.energy_j ? fmt::format(", {:.0f} J (RAPL packages)", *cost.energy_j) : ", energy " + cost.energy_note;
  if (cost.price > 0) s += fmt::format(", price {:.4f}", cost.price);
  s += "\n";
  if (t.best && baseline_measured && obj.quantity == "time_to_target") {
    const double saved = ev[*t.baseline].result.value - ev[*t.best].result.value;
    if (saved > 0)
      s += fmt::format("bought: {:.3f} s less training per run to the target ({:.2f}x faster, one seed each); the "
                       "search pays for itself after {:.0f} runs\n",
                       saved, ev[*t.baseline].result.value / ev[*t.best].result.value, std::ceil(cost.wall_s / saved));
  }
  return s;
}

std::string write_tuned_recipe(const Recipe& recipe, size_t entry, const TuningResult& t, const TuneObjective& obj,
                               const SearchCost& cost, const std::string& path) {
  const auto& best = t.evaluations[*t.best];
  const std::string header = fmt::format(
      "Written by d5 tune from {} (entry {}): {} {} with {}\n(evaluation {}); {} evaluations of {} configurations in "
      "{:.1f} s, {:.4f} node-hours.",
      recipe.source, recipe.entries[entry].name, obj.quantity, value_text(obj, best.result.value),
      config_text(best.evaluation.config), evaluation_id(best.evaluation, best.baseline), t.evaluations.size(),
      t.trials_drawn, cost.wall_s, cost.node_hours);
  const std::string text = recipe_with_values(recipe.text, entry, best.evaluation.config, header);
  parse_recipe(text, path);  // what is written must read back
  std::ofstream f(path);
  f << text;
  if (!f) D5_THROW(IoError, "cannot write the tuned recipe '{}'", path);
  return path;
}

int tune_command(const TuneOpts& o, const GlobalOptions& g) {
  const Recipe recipe = load_recipe(resolve_recipe(o.recipe));
  const size_t entry = pick_entry(recipe, o.entry);
  const RecipeEntry& e = recipe.entries[entry];
  const std::vector<Override> sets = parse_overrides(o.sets);
  const SearchSpace space = search_space_of(e, o.space);
  D5_CHECK_ARG(!space.empty(), "entry '{}' has nothing to search: give it a 'search:' map or use --space KEY=SPEC",
               e.name);
  TunerOptions to;
  parse_budget(o.budget, to);
  D5_CHECK_ARG(o.method == "asha" || o.method == "random", "--method {}: asha or random", o.method);
  to.method = o.method == "asha" ? TunerOptions::Method::asha : TunerOptions::Method::random;
  to.eta = o.eta;
  to.min_resource = o.min_resource;
  const std::string resource_key =
      !o.resource.empty() ? o.resource : e.mutable_params.contains("epochs") ? "epochs" : "steps";
  D5_CHECK_ARG(std::none_of(space.begin(), space.end(), [&](const auto& d) { return d.key == resource_key; }),
               "'{}' is the resource of the search and cannot also be searched", resource_key);
  to.max_resource = o.max_resource > 0 ? o.max_resource : resource_value(e, resource_key, sets);
  to.slots = o.slots;
  to.seed = g.seed;
  if (!o.no_baseline) to.baseline = recipe_values(e, space, sets);
  D5_CHECK_ARG(o.confirm_seeds == 0 || o.confirm_seeds >= 2, "--confirm-seeds: at least 2 seeds, or 0 for none");

  TrialSetup setup;
  setup.recipe = single_entry(recipe, entry, SeedPlan{{g.seed}, 0});
  setup.sets = sets;
  setup.resource_key = resource_key;
  setup.objective = pick_objective(e, o);
  setup.early_stop_factor = o.early_stop;
  setup.globals = g;
  setup.dir = (fs::path(o.results_dir) / "trials").string();
  setup.executable = self_executable();
  std::error_code ec;
  fs::create_directories(setup.dir, ec);
  if (ec) D5_THROW(IoError, "cannot create '{}': {}", setup.dir, ec.message());

  SearchCost cost;
  const auto& domains = rapl_domains(&cost.energy_note);
  const auto e0 = domains.empty() ? std::nullopt : read_energy(domains);
  const bool with_baseline = to.baseline.has_value();
  const TuningResult t = tune(space, to, [&](const Evaluation& ev) {
    const EvaluationResult r = run_trial(setup, ev, with_baseline && ev.trial == 0);
    if (o.out.format != "json")
      std::cerr << fmt::format("d5 tune: {} {}={:g}: {}\n", evaluation_id(ev, with_baseline && ev.trial == 0),
                               resource_key, ev.resource, r.detail);
    return r;
  });
  const auto e1 = e0 ? read_energy(domains) : std::nullopt;
  if (e0 && e1) cost.energy_j = package_joules_between(domains, *e0, *e1);
  cost.energy_note = cost.energy_j ? "RAPL package domains around the search" : "unavailable: " + cost.energy_note;
  cost.wall_s = t.wall_s;
  cost.node_hours = t.wall_s * o.nodes / 3600;
  cost.price = o.price * cost.node_hours;
  for (const auto& d : t.evaluations) cost.trial_process_s += d.result.record.value("wall_s", 0.0);

  std::string text = evaluations_table(t, resource_key) + summary_text(t, setup.objective, cost, o.nodes);
  nlohmann::json summary = {
      {"recipe", recipe.name}, {"source", recipe.source}, {"entry", e.name}, {"method", o.method},
      {"eta", o.eta}, {"resource", resource_key}, {"rungs", t.rungs}, {"budget", o.budget},
      {"objective", setup.objective.quantity}, {"lower_is_better", setup.objective.lower_is_better},
      {"early_stop_factor", o.early_stop}, {"slots", o.slots}, {"trials_drawn", t.trials_drawn},
      {"stop_reason", t.stop_reason}, {"cost", to_json(cost)}};
  for (const auto& d : space) summary["space"][d.key] = to_string(d);
  if (t.best) {
    const auto& b = t.evaluations[*t.best];
    summary["best"] = {{"evaluation", evaluation_id(b.evaluation, b.baseline)}, {"config", b.evaluation.config},
                       {"objective", setup.objective.lower_is_better ? b.result.value : -b.result.value}};
    if (!b.baseline) {
      const std::string path = o.write_recipe.empty() ? (fs::path(o.results_dir) / "tuned.yaml").string() : o.write_recipe;
      summary["tuned_recipe"] = write_tuned_recipe(recipe, entry, t, setup.objective, cost, path);
      text += fmt::format("tuned recipe: {}\n", path);
      if (o.confirm_seeds > 0) {
        D5_CHECK_ARG(setup.objective.to_target, "--confirm-seeds compares times or steps to a target; {} is neither",
                     setup.objective.quantity);
        text += fmt::format("confirmation over {} seeds each:\n", o.confirm_seeds);
        summary["confirmation"] = confirm(recipe, entry, b.evaluation.config, o, g, setup.objective, cost.wall_s, text);
      }
    } else {
      text += "the recipe's own values were the best configuration found; no tuned recipe written\n";
    }
  }
  nlohmann::json manifest = make_manifest(settings_from(g));
  manifest["extra"]["tune"] = summary;
  const Results results = tune_results(t, setup.objective, manifest);
  const std::string path = (fs::path(o.results_dir) / "tune.json").string();
  write_results(path, results);
  emit_text(text + fmt::format("all evaluations: {}\n", path), to_json(results), o.out);
  return t.best ? kExitOk : kExitFailed;
}

}  // namespace

Command register_tune(CLI::App& app, const GlobalOptions& g) {
  auto* cmd = app.add_subcommand(
      "tune", "Search a recipe entry's mutable options (random search or successive halving); every trial's results "
              "kept, the best configuration written back as a recipe, the search's cost reported");
  auto o = std::make_shared<TuneOpts>();
  cmd->add_option("recipe", o->recipe, "A recipe file, or a shipped recipe's name")->required();
  cmd->add_option("--budget", o->budget, "Trials (20), a time (90s, 15m, 2h), or both (20,15m)")->required();
  cmd->add_option("--entry", o->entry, "The entry to tune (default: the one with a search map, or the only one)");
  cmd->add_option("--method", o->method, "asha (successive halving with early stopping) or random")
      ->default_val("asha");
  cmd->add_option("--space", o->space, "KEY=SPEC: search KEY over choice:A,B | uniform:LO:HI | log:LO:HI | int:LO:HI | "
                                       "logint:LO:HI (repeatable; replaces the recipe's search map for KEY)");
  cmd->add_option("--set", o->sets, "[ENTRY.]KEY=VALUE: a mutable option's value for every trial (repeatable)");
  cmd->add_option("--resource", o->resource, "The mutable option successive halving grows (default: epochs, else steps)");
  cmd->add_option("--min-resource", o->min_resource, "The lowest rung's resource")->default_val(1)
      ->check(CLI::PositiveNumber);
  cmd->add_option("--max-resource", o->max_resource, "The top rung's resource (default: the recipe's value)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--eta", o->eta, "Reduction factor: the top 1/eta of a rung moves up with eta times the resource")
      ->default_val(3);
  cmd->add_option("--objective", o->objective, "What to minimize (default: time_to_target when the entry has a target)");
  cmd->add_flag("--maximize", o->maximize, "Maximize --objective instead");
  cmd->add_option("--early-stop", o->early_stop,
                  "Stop a trial training longer than this factor times the best time to target so far (0: never)")
      ->default_val(1.5)->check(CLI::NonNegativeNumber);
  cmd->add_flag("--no-baseline", o->no_baseline, "Do not run the recipe's own values first");
  cmd->add_option("--slots", o->slots, "Trials run at once, each its own process")->default_val(1)
      ->check(CLI::PositiveNumber);
  cmd->add_option("--confirm-seeds", o->confirm_seeds,
                  "Then run the shipped and the tuned configuration with this many seeds each and compare them")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--results-dir", o->results_dir, "Where trials, tune.json and tuned.yaml go")->required();
  cmd->add_option("--write-recipe", o->write_recipe, "Where the tuned recipe goes (default: RESULTS-DIR/tuned.yaml)");
  cmd->add_option("--price-per-node-hour", o->price, "Price of one node for an hour: the search's price")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--nodes", o->nodes, "Nodes the search occupies")->default_val(1)->check(CLI::PositiveNumber);
  add_output_options(*cmd, o->out);
  return {cmd, [o, &g] { return tune_command(*o, g); }};
}

}  // namespace d5::cli
