// Reading recipes from YAML (yaml-cpp) and checking them against their division's rules.
#include <algorithm>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "deep500/core/error.h"
#include "deep500/core/parse_number.h"
#include "deep500/experiment/recipe.h"
#include "deep500/experiment/search_space.h"

namespace d5 {

namespace {

const std::set<std::string> kRecipeKeys = {"recipe", "description", "division", "seeds", "require_valid",
                                           "fixed",  "mutable",     "grid",     "entries", "criteria",
                                           "score"};
const std::set<std::string> kEntryKeys = {"name",    "command", "positional", "after",
                                          "fixed",   "mutable", "grid",       "criteria",
                                          "seeds",   "reference_steps_to_target", "reference_for",
                                          "search"};

std::string where(const YAML::Node& n) {
  return n.Mark().is_null() ? "" : fmt::format(" (line {})", n.Mark().line + 1);
}

// A plain scalar becomes a bool, an integer or a number where it reads as one; a quoted scalar
// stays a string.
nlohmann::json scalar(const YAML::Node& n, const std::string& what) {
  if (!n.IsScalar()) D5_THROW(FormatError, "{}{}: expected a single value, not a list or map", what, where(n));
  const std::string& s = n.Scalar();
  if (n.Tag() == "!") return s;
  if (s == "true") return true;
  if (s == "false") return false;
  if (auto i = parse_int(s)) return *i;
  if (auto d = parse_double(s)) return *d;
  return s;
}

nlohmann::json value(const YAML::Node& n, const std::string& what) {
  if (n.IsNull()) return nullptr;
  if (!n.IsSequence()) return scalar(n, what);
  nlohmann::json a = nlohmann::json::array();
  for (const auto& e : n) a.push_back(scalar(e, what));
  return a;
}

Params params(const YAML::Node& n, const std::string& what, bool grid) {
  Params p = Params::object();
  if (!n) return p;
  if (!n.IsMap()) D5_THROW(FormatError, "{}{}: expected a map of option: value", what, where(n));
  for (const auto& kv : n) {
    const std::string key = kv.first.as<std::string>();
    const std::string item = fmt::format("{}.{}", what, key);
    if (grid) {
      if (!kv.second.IsSequence() || kv.second.size() == 0)
        D5_THROW(FormatError, "{}{}: a grid option takes a non-empty list of values", item, where(kv.second));
    }
    p[key] = value(kv.second, item);
  }
  return p;
}

std::vector<Criterion> criteria(const YAML::Node& n, const std::string& what) {
  std::vector<Criterion> out;
  if (!n) return out;
  if (!n.IsSequence()) D5_THROW(FormatError, "{}{}: expected a list of criteria", what, where(n));
  for (const auto& c : n) out.push_back(parse_criterion(c.as<std::string>()));
  return out;
}

void check_keys(const YAML::Node& n, const std::set<std::string>& allowed, const std::string& what) {
  for (const auto& kv : n) {
    const std::string key = kv.first.as<std::string>();
    if (!allowed.count(key))
      D5_THROW(FormatError, "{}: unknown key '{}'{}; known keys: {}", what, key, where(kv.first),
               fmt::join(allowed, ", "));
  }
}

// Recipe-wide options apply to every entry; an entry's own win.
void merge(Params& into, const Params& from) {
  for (const auto& [k, v] : from.items())
    if (!into.contains(k)) into[k] = v;
}

bool in(const Params& p, const std::string& key) { return p.contains(key); }

void check_division(const Recipe& r, const RecipeEntry& e) {
  const std::string what = fmt::format("recipe '{}', entry '{}'", r.name, e.name);
  for (const auto& [k, v] : e.fixed.items()) {
    if (in(e.mutable_params, k) || in(e.grid, k))
      D5_THROW(FormatError, "{}: '{}' is both fixed and mutable; a fixed option cannot change", what, k);
  }
  for (const auto& [k, v] : e.mutable_params.items())
    if (in(e.grid, k)) D5_THROW(FormatError, "{}: '{}' is in both mutable and grid; keep it in one", what, k);
  const auto changeable = [&](const std::string& k) { return in(e.mutable_params, k) || in(e.grid, k); };
  if (changeable("dataset"))
    D5_THROW(InvalidArgument, "{}: the dataset is fixed in both divisions; move 'dataset' to fixed", what);
  const bool training = !e.command.empty() && e.command.front() == "train";
  if (r.division == Division::Closed) {
    // A grid over models or optimizers is still the recipe's choice (--set may only pick one of
    // its values); a mutable one would let any model in.
    for (const char* k : {"model", "optimizer"})
      if (in(e.mutable_params, k))
        D5_THROW(InvalidArgument,
                 "{}: the closed division fixes the model and optimizer, but '{}' is mutable; move it to fixed (or "
                 "list the allowed values in grid), or declare 'division: open'",
                 what, k);
  } else if (training) {
    bool target = in(e.fixed, "target-accuracy") || in(e.fixed, "target");
    for (const auto& c : e.criteria)
      target = target || c.quantity.find("accuracy") != std::string::npos || c.quantity.starts_with("final_test_") ||
               c.quantity.starts_with("time_to_target");
    if (!in(e.fixed, "dataset") || !target)
      D5_THROW(InvalidArgument,
               "{}: an open-division training entry must fix the dataset and a quality target (fixed "
               "'dataset' and 'target' or 'target-accuracy', or a criterion on a final_test_ quantity)",
               what);
  }
}

// `seeds: [1, 2, 3]` or `seeds: 5` (five seeds from d5's --seed on).
SeedPlan seed_plan(const YAML::Node& n, const std::string& what) {
  SeedPlan plan;
  if (!n) return plan;
  if (n.IsScalar()) {
    const auto v = parse_int(n.Scalar());
    if (!v || *v < 1)
      D5_THROW(FormatError, "{}{}: 'seeds' must be a count of at least 1 or a list of integers, e.g. 5 or [1, 2, 3]",
               what, where(n));
    plan.count = *v;
    return plan;
  }
  if (!n.IsSequence())
    D5_THROW(FormatError, "{}{}: 'seeds' must be a count or a list of integers, e.g. 5 or [1, 2, 3]", what, where(n));
  for (const auto& s : n) {
    const auto v = s.IsScalar() ? parse_int(s.Scalar()) : std::nullopt;
    if (!v || *v < 0)
      D5_THROW(FormatError, "{}{}: seed '{}' is not a non-negative integer", what, where(s), s.IsScalar() ? s.Scalar() : "");
    plan.list.push_back(static_cast<uint64_t>(*v));
  }
  return plan;
}

RecipeEntry parse_entry(const YAML::Node& n, const Recipe& r, const Params& fixed, const Params& mut,
                        const Params& grid, size_t index) {
  const std::string what = fmt::format("recipe '{}', entry {}", r.name, index + 1);
  if (!n.IsMap()) D5_THROW(FormatError, "{}{}: expected a map with name, command, ...", what, where(n));
  check_keys(n, kEntryKeys, what);
  RecipeEntry e;
  if (!n["command"]) D5_THROW(FormatError, "{}{}: 'command' is missing (e.g. 'train' or 'ops bench')", what, where(n));
  std::istringstream words(n["command"].as<std::string>());
  for (std::string w; words >> w;) e.command.push_back(w);
  if (e.command.empty()) D5_THROW(FormatError, "{}: 'command' is empty", what);
  e.name = n["name"] ? n["name"].as<std::string>() : fmt::format("{}", fmt::join(e.command, "-"));
  if (n["positional"])
    for (const auto& p : n["positional"]) e.positional.push_back(p.as<std::string>());
  if (n["after"])
    for (const auto& p : n["after"]) e.after.push_back(p.as<std::string>());
  const std::string ew = fmt::format("entry '{}'", e.name);
  e.fixed = params(n["fixed"], ew + ".fixed", false);
  e.mutable_params = params(n["mutable"], ew + ".mutable", false);
  e.grid = params(n["grid"], ew + ".grid", true);
  merge(e.fixed, fixed);
  merge(e.mutable_params, mut);
  merge(e.grid, grid);
  e.criteria = criteria(n["criteria"], ew + ".criteria");
  e.seeds = seed_plan(n["seeds"], ew);
  if (const YAML::Node ref = n["reference_steps_to_target"]) {
    if (!ref.IsSequence() || ref.size() == 0)
      D5_THROW(FormatError, "{}{}: 'reference_steps_to_target' must be a list of the steps reference runs took, e.g. "
               "[375, 500, 500]", ew, where(ref));
    for (const auto& v : ref) {
      const auto x = v.IsScalar() ? parse_double(v.Scalar()) : std::nullopt;
      if (!x || !(*x > 0))
        D5_THROW(FormatError, "{}{}: reference step count '{}' is not a positive number", ew, where(v),
                 v.IsScalar() ? v.Scalar() : "");
      e.reference_steps_to_target.push_back(*x);
    }
  }
  e.reference_for = params(n["reference_for"], ew + ".reference_for", false);
  if (!e.reference_for.empty() && e.reference_steps_to_target.empty())
    D5_THROW(FormatError, "{}: 'reference_for' says what the reference runs used, but there is no "
             "'reference_steps_to_target'", ew);
  e.search = params(n["search"], ew + ".search", false);
  for (const auto& p : e.positional)
    if (!in(e.fixed, p) && !in(e.mutable_params, p) && !in(e.grid, p))
      D5_THROW(FormatError, "{}: positional option '{}' has no value in fixed, mutable or grid", ew, p);
  for (const auto& p : e.after)
    if (!in(e.fixed, p) && !in(e.mutable_params, p) && !in(e.grid, p))
      D5_THROW(FormatError, "{}: option '{}' listed in 'after' has no value in fixed, mutable or grid", ew, p);
  return e;
}

// score: {quantity: time_to_target, better: lower, entry: lenet5-tta, over_runs: olympic}
RecipeScore parse_score(const YAML::Node& n, const Recipe& r) {
  const std::string what = "recipe " + r.source + ": score";
  if (!n.IsMap())
    D5_THROW(FormatError, "{}{}: expected a map like {{quantity: time_to_target, better: lower}}", what, where(n));
  check_keys(n, {"quantity", "better", "entry", "over_runs"}, what);
  RecipeScore s;
  s.declared = true;
  if (!n["quantity"]) D5_THROW(FormatError, "{}{}: 'quantity' is missing", what, where(n));
  s.quantity = n["quantity"].as<std::string>();
  parse_criterion(s.quantity + " reached");  // the same names criteria take
  const std::string better = n["better"] ? n["better"].as<std::string>() : "";
  if (better != "lower" && better != "higher")
    D5_THROW(FormatError, "{}{}: 'better' must be 'lower' or 'higher' (which way the ranking goes)", what, where(n));
  s.lower_is_better = better == "lower";
  if (n["over_runs"]) {
    const std::string over = n["over_runs"].as<std::string>();
    if (over != "median" && over != "olympic")
      D5_THROW(FormatError, "{}{}: 'over_runs' must be 'median' or 'olympic' (MLPerf's: the mean without the best and "
               "the worst run)", what, where(n["over_runs"]));
    s.olympic = over == "olympic";
  }
  if (n["entry"]) {
    s.entry = n["entry"].as<std::string>();
    const bool known = std::any_of(r.entries.begin(), r.entries.end(), [&](const auto& e) { return e.name == s.entry; });
    if (!known) D5_THROW(FormatError, "{}{}: no entry is named '{}'", what, where(n["entry"]), s.entry);
  }
  return s;
}

}  // namespace

Recipe parse_recipe(const std::string& yaml_text, const std::string& source) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    D5_THROW(FormatError, "recipe {}: not valid YAML: {}", source, e.what());
  }
  try {
    if (!root.IsMap()) D5_THROW(FormatError, "recipe {}: expected a map with 'recipe', 'entries', ...", source);
    check_keys(root, kRecipeKeys, "recipe " + source);
    Recipe r;
    r.source = source;
    r.text = yaml_text;
    if (!root["recipe"]) D5_THROW(FormatError, "recipe {}: 'recipe' (its name) is missing", source);
    r.name = root["recipe"].as<std::string>();
    if (root["description"]) r.description = root["description"].as<std::string>();
    if (root["division"]) {
      const auto d = root["division"].as<std::string>();
      if (d != "closed" && d != "open")
        D5_THROW(FormatError, "recipe {}: division '{}' is neither 'closed' nor 'open'", source, d);
      r.division = d == "closed" ? Division::Closed : Division::Open;
    }
    if (root["require_valid"]) r.require_valid = root["require_valid"].as<bool>();
    r.seeds = seed_plan(root["seeds"], "recipe " + source);
    const Params fixed = params(root["fixed"], "fixed", false);
    const Params mut = params(root["mutable"], "mutable", false);
    const Params grid = params(root["grid"], "grid", true);
    r.criteria = criteria(root["criteria"], "criteria");
    const YAML::Node entries = root["entries"];
    if (!entries || !entries.IsSequence() || entries.size() == 0)
      D5_THROW(FormatError, "recipe {}: 'entries' must be a non-empty list of runs", source);
    std::set<std::string> names;
    for (size_t i = 0; i < entries.size(); ++i) {
      r.entries.push_back(parse_entry(entries[i], r, fixed, mut, grid, i));
      if (!names.insert(r.entries.back().name).second)
        D5_THROW(FormatError, "recipe {}: two entries are named '{}'; names must be unique", source,
                 r.entries.back().name);
    }
    for (const auto& e : r.entries) {
      check_division(r, e);
      search_space_of(e, {});  // a search over what may not change fails here, not at tuning time
    }
    if (root["score"]) r.score = parse_score(root["score"], r);
    return r;
  } catch (const YAML::Exception& e) {
    D5_THROW(FormatError, "recipe {}: {}", source, e.what());
  }
}

std::string recipe_with_values(const std::string& yaml_text, size_t entry, const Params& values,
                               const std::string& header) {
  YAML::Node root = YAML::Load(yaml_text);
  YAML::Node entries = root["entries"];
  D5_CHECK_ARG(entries && entries.IsSequence() && entry < entries.size(), "the recipe has no entry {}", entry + 1);
  YAML::Node e = entries[entry];
  if (!e["mutable"]) e["mutable"] = YAML::Node(YAML::NodeType::Map);
  YAML::Node mut = e["mutable"];
  for (const auto& [k, v] : values.items()) {
    if (v.is_string())
      mut[k] = v.get<std::string>();
    else if (v.is_boolean())
      mut[k] = v.get<bool>();
    else if (v.is_number_integer())
      mut[k] = v.get<int64_t>();
    else if (v.is_number())
      mut[k] = fmt::format("{}", v.get<double>());  // the shortest text that reads back as the same double
    else
      D5_THROW(InvalidArgument, "option '{}': a recipe value is a string, number or bool, not {}", k, v.dump());
  }
  YAML::Emitter out;
  out << root;
  std::string text;
  std::istringstream lines(header);
  for (std::string l; std::getline(lines, l);) text += l.empty() ? "#\n" : "# " + l + "\n";
  return text + out.c_str() + "\n";
}

}  // namespace d5
