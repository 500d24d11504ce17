// Reading recipes (yaml-cpp) and planning their runs.
#include "deep500/experiment/recipe.h"

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "deep500/core/error.h"
#include "deep500/core/parse_number.h"

namespace d5 {

namespace {

std::string arg_text(const nlohmann::json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_array()) {
    std::vector<std::string> parts;
    for (const auto& e : v) parts.push_back(arg_text(e));
    return fmt::format("{}", fmt::join(parts, ","));
  }
  return v.dump();
}

// true is a flag, false and null leave the option out.
void append_option(std::vector<std::string>& args, const std::string& key, const nlohmann::json& v) {
  if (v.is_null() || v == false) return;
  args.push_back("--" + key);
  if (v != true) args.push_back(arg_text(v));
}

// "onednn" -> "onednn"; anything else a file name cannot hold becomes '_'.
std::string file_safe(const std::string& s) {
  std::string out = s;
  for (char& c : out)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.' && c != '=') c = '_';
  return out;
}

}  // namespace

nlohmann::json parse_override_value(const std::string& text) {
  if (text == "true") return true;
  if (text == "false") return false;
  if (auto i = parse_int(text)) return *i;
  if (auto d = parse_double(text)) return *d;
  return text;
}

void add_result_file_options(std::vector<std::string>& args, const std::string& path) {
  const auto at = std::find(args.begin(), args.end(), "--");
  args.insert(at, {"--format", "json", "-o", path});
}

std::vector<std::string> without_result_file_options(const std::vector<std::string>& args) {
  std::vector<std::string> out;
  bool after = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    after = after || a == "--";
    if (!after && (a == "-o" || a == "--output" || a == "--format")) {
      ++i;
      continue;
    }
    if (!after && (a.starts_with("--output=") || a.starts_with("--format="))) continue;
    out.push_back(a);
  }
  return out;
}

const char* to_string(Division d) { return d == Division::Closed ? "closed" : "open"; }

bool is_global_option(const std::string& key) {
  return key == "threads" || key == "deterministic" || key == "math" || key == "malloc";
}

#ifndef D5_HAVE_YAML
Recipe parse_recipe(const std::string&, const std::string& source) {
  D5_THROW(NotBuilt, "recipe {}: this d5 was built without yaml-cpp, so it cannot read recipes (Debian: "
           "libyaml-cpp-dev, then rebuild)", source);
}
std::string recipe_with_values(const std::string&, size_t, const Params&, const std::string&) {
  D5_THROW(NotBuilt, "this d5 was built without yaml-cpp, so it cannot write recipes (Debian: libyaml-cpp-dev, then "
           "rebuild)");
}
#endif

Recipe load_recipe(const std::string& path) {
  std::ifstream in(path);
  if (!in) D5_THROW(IoError, "cannot read recipe '{}' (does it exist? recipes/ has the shipped ones)", path);
  std::stringstream s;
  s << in.rdbuf();
  return parse_recipe(s.str(), path);
}

std::vector<Override> parse_overrides(const std::vector<std::string>& items) {
  std::vector<Override> out;
  for (const auto& item : items) {
    const auto eq = item.find('=');
    if (eq == std::string::npos || eq == 0) D5_THROW(InvalidArgument, "--set '{}' is not [ENTRY.]KEY=VALUE", item);
    Override o;
    std::string key = item.substr(0, eq);
    o.value = item.substr(eq + 1);
    if (const auto dot = key.find('.'); dot != std::string::npos) {
      o.entry = key.substr(0, dot);
      key = key.substr(dot + 1);
    }
    o.key = key;
    out.push_back(std::move(o));
  }
  return out;
}

std::vector<uint64_t> SeedPlan::seeds(uint64_t default_seed) const {
  if (!list.empty()) return list;
  std::vector<uint64_t> out;
  for (int64_t i = 0; i < std::max<int64_t>(count, 1); ++i) out.push_back(default_seed + static_cast<uint64_t>(i));
  return out;
}

std::vector<PlannedRun> plan_runs(const Recipe& recipe, const std::vector<Override>& overrides, uint64_t default_seed) {
  std::vector<RecipeEntry> entries = recipe.entries;
  for (const auto& o : overrides) {
    bool applied = false;
    for (auto& e : entries) {
      if (!o.entry.empty() && o.entry != e.name) continue;
      if (e.fixed.contains(o.key))
        D5_THROW(InvalidArgument,
                 "--set {}: '{}' is fixed in entry '{}' of recipe '{}' ({} division); only mutable options change",
                 o.key, o.key, e.name, recipe.name, to_string(recipe.division));
      if (e.grid.contains(o.key)) {
        const Params v = parse_override_value(o.value);  // the grid's own type: clang finds == of mixed types ambiguous
        const auto& values = e.grid[o.key];
        if (recipe.division == Division::Closed && (o.key == "model" || o.key == "optimizer") &&
            std::find(values.begin(), values.end(), v) == values.end())
          D5_THROW(InvalidArgument, "--set {}: the closed division allows only the recipe's {}s here: {}", o.key,
                   o.key, values.dump());
        e.grid.erase(o.key);  // one value instead of the sweep
        e.mutable_params[o.key] = v;
        applied = true;
      } else if (e.mutable_params.contains(o.key)) {
        e.mutable_params[o.key] = parse_override_value(o.value);
        applied = true;
      } else if (o.key == "seeds") {  // how many times the entry runs, when its command has no 'seeds' of its own
        const auto n = parse_int(o.value);
        D5_CHECK_ARG(n && *n >= 1, "--set seeds={}: give a count of at least 1 (the seeds are --seed and those after it)",
                     o.value);
        e.seeds = SeedPlan{{}, *n};
        applied = true;
      }
    }
    if (!applied) {
      std::set<std::string> known;
      for (const auto& e : entries) {
        if (!o.entry.empty() && o.entry != e.name) continue;
        for (const auto& [k, v] : e.mutable_params.items()) known.insert(k);
        for (const auto& [k, v] : e.grid.items()) known.insert(k);
      }
      const bool no_entry = !o.entry.empty() && std::none_of(entries.begin(), entries.end(),
                                                             [&](const auto& e) { return e.name == o.entry; });
      if (no_entry) D5_THROW(InvalidArgument, "--set {}.{}: recipe '{}' has no entry '{}'", o.entry, o.key, recipe.name, o.entry);
      D5_THROW(InvalidArgument, "--set {}: no entry of recipe '{}' has a mutable option '{}'; mutable: {}", o.key,
               recipe.name, o.key, known.empty() ? std::string("none") : fmt::format("{}", fmt::join(known, ", ")));
    }
  }

  std::vector<PlannedRun> runs;
  for (size_t ei = 0; ei < entries.size(); ++ei) {
    const RecipeEntry& e = entries[ei];
    const std::vector<uint64_t> seeds = (e.seeds.given() ? e.seeds : recipe.seeds).seeds(default_seed);
    // Grid points in recipe order, the last option varying fastest.
    std::vector<Params> points{Params::object()};
    for (const auto& [k, values] : e.grid.items()) {
      std::vector<Params> next;
      for (const auto& p : points)
        for (const auto& v : values) {
          Params q = p;
          q[k] = v;
          next.push_back(std::move(q));
        }
      points = std::move(next);
    }
    for (const auto& point : points) {
      for (uint64_t seed : seeds) {
        PlannedRun run;
        run.entry = ei;
        run.seed = seed;
        run.params = e.fixed;
        for (const auto& [k, v] : e.mutable_params.items()) run.params[k] = v;
        std::vector<std::string> label;
        for (const auto& [k, v] : point.items()) {
          run.params[k] = v;
          label.push_back(k + "=" + arg_text(v));
        }
        run.point = fmt::format("{}", fmt::join(label, " "));
        if (seeds.size() > 1) label.push_back(fmt::format("seed={}", seed));
        run.label = fmt::format("{}", fmt::join(label, " "));
        run.id = file_safe(label.empty() ? e.name : fmt::format("{}-{}", e.name, fmt::join(label, "-")));

        // Global options go before the subcommand, the rest after its positional arguments.
        run.args = {"--seed", std::to_string(seed)};
        for (const auto& [k, v] : run.params.items())
          if (is_global_option(k)) append_option(run.args, k, v);
        run.args.insert(run.args.end(), e.command.begin(), e.command.end());
        for (const auto& p : e.positional) run.args.push_back(arg_text(run.params[p]));
        auto listed = [](const std::vector<std::string>& names, const std::string& k) {
          return std::find(names.begin(), names.end(), k) != names.end();
        };
        for (const auto& [k, v] : run.params.items())
          if (!is_global_option(k) && !listed(e.positional, k) && !listed(e.after, k)) append_option(run.args, k, v);
        if (!e.after.empty()) {
          run.args.push_back("--");
          for (const auto& k : e.after) append_option(run.args, k, run.params[k]);
        }
        runs.push_back(std::move(run));
      }
    }
  }
  return runs;
}

void add_run_globals(std::vector<PlannedRun>& runs, const RunGlobals& g) {
  for (auto& r : runs) {
    std::vector<std::string> globals;
    if (g.threads > 0 && !r.params.contains("threads")) globals = {"--threads", std::to_string(g.threads)};
    if (g.deterministic && !r.params.contains("deterministic")) globals.push_back("--deterministic");
    if (g.math != "strict" && !r.params.contains("math")) {
      globals.push_back("--math");
      globals.push_back(g.math);
    }
    r.args.insert(r.args.begin(), globals.begin(), globals.end());
  }
}

}  // namespace d5
