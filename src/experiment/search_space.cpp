#include "deep500/experiment/search_space.h"

#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "deep500/core/error.h"
#include "deep500/core/parse_number.h"

namespace d5 {

namespace {

constexpr const char* kForms = "choice:A,B,..., uniform:LOW:HIGH, log:LOW:HIGH, int:LOW:HIGH or logint:LOW:HIGH";

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t from = 0;
  for (size_t at = s.find(sep); at != std::string::npos; at = s.find(sep, from)) {
    out.push_back(s.substr(from, at - from));
    from = at + 1;
  }
  out.push_back(s.substr(from));
  return out;
}

// Uniform in [0, 1) from 53 bits, the same on every standard library (std's distributions are not).
double unit(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

double three_significant_digits(double v) {
  if (v == 0 || !std::isfinite(v)) return v;
  const double scale = std::pow(10.0, 2 - std::floor(std::log10(std::fabs(v))));
  return std::round(v * scale) / scale;
}

}  // namespace

SearchDimension parse_search_dimension(const std::string& key, const std::string& spec) {
  const auto colon = spec.find(':');
  if (colon == std::string::npos)
    D5_THROW(FormatError, "search space of '{}': '{}' names no kind; write {}", key, spec, kForms);
  const std::string kind = spec.substr(0, colon), rest = spec.substr(colon + 1);
  SearchDimension d;
  d.key = key;
  if (kind == "choice") {
    d.kind = SearchDimension::Kind::choice;
    for (const auto& v : split(rest, ','))
      if (!v.empty()) d.choices.push_back(parse_override_value(v));
    if (d.choices.empty()) D5_THROW(FormatError, "search space of '{}': 'choice:' lists no value", key);
    return d;
  }
  const std::map<std::string, SearchDimension::Kind> kinds = {{"uniform", SearchDimension::Kind::uniform},
                                                              {"log", SearchDimension::Kind::log_uniform},
                                                              {"int", SearchDimension::Kind::integer},
                                                              {"logint", SearchDimension::Kind::log_integer}};
  const auto k = kinds.find(kind);
  if (k == kinds.end()) D5_THROW(FormatError, "search space of '{}': unknown kind '{}'; write {}", key, kind, kForms);
  d.kind = k->second;
  const auto bounds = split(rest, ':');
  const auto low = bounds.size() == 2 ? parse_double(bounds[0]) : std::nullopt;
  const auto high = bounds.size() == 2 ? parse_double(bounds[1]) : std::nullopt;
  if (!low || !high || !std::isfinite(*low) || !std::isfinite(*high) || *low > *high)
    D5_THROW(FormatError, "search space of '{}': '{}' needs two finite bounds LOW:HIGH with LOW <= HIGH", key, spec);
  const bool integer = d.kind == SearchDimension::Kind::integer || d.kind == SearchDimension::Kind::log_integer;
  if (integer && (*low != std::floor(*low) || *high != std::floor(*high)))
    D5_THROW(FormatError, "search space of '{}': '{}' takes integer bounds", key, spec);
  const bool logarithmic = d.kind == SearchDimension::Kind::log_uniform || d.kind == SearchDimension::Kind::log_integer;
  if (logarithmic && *low <= 0)
    D5_THROW(FormatError, "search space of '{}': '{}' is logarithmic and needs a positive lower bound", key, spec);
  d.low = *low;
  d.high = *high;
  return d;
}

SearchDimension search_dimension_from(const std::string& key, const nlohmann::json& value) {
  if (value.is_array()) {
    if (value.empty()) D5_THROW(FormatError, "search space of '{}': an empty list of choices", key);
    SearchDimension d;
    d.key = key;
    for (const auto& v : value) d.choices.push_back(v);
    return d;
  }
  if (!value.is_string())
    D5_THROW(FormatError, "search space of '{}': expected a list of choices or one of {}, not {}", key, kForms,
             value.dump());
  return parse_search_dimension(key, value.get<std::string>());
}

std::string to_string(const SearchDimension& d) {
  switch (d.kind) {
    case SearchDimension::Kind::choice: {
      std::vector<std::string> v;
      for (const auto& c : d.choices) v.push_back(c.is_string() ? c.get<std::string>() : c.dump());
      return fmt::format("choice:{}", fmt::join(v, ","));
    }
    case SearchDimension::Kind::uniform: return fmt::format("uniform:{}:{}", d.low, d.high);
    case SearchDimension::Kind::log_uniform: return fmt::format("log:{}:{}", d.low, d.high);
    case SearchDimension::Kind::integer: return fmt::format("int:{}:{}", d.low, d.high);
    case SearchDimension::Kind::log_integer: return fmt::format("logint:{}:{}", d.low, d.high);
  }
  return "";
}

SearchSpace search_space_of(const RecipeEntry& entry, const std::vector<std::string>& space_items) {
  SearchSpace space;
  const auto put = [&](SearchDimension d) {
    if (entry.fixed.contains(d.key))
      D5_THROW(InvalidArgument, "entry '{}': '{}' is fixed, part of the experiment, and cannot be searched", entry.name,
               d.key);
    if (entry.grid.contains(d.key))
      D5_THROW(InvalidArgument, "entry '{}': '{}' is a grid option; pin it with --set {}=VALUE to search it",
               entry.name, d.key, d.key);
    if (!entry.mutable_params.contains(d.key))
      D5_THROW(InvalidArgument, "entry '{}': '{}' is not one of its mutable options ({})", entry.name, d.key,
               [&] {
                 std::vector<std::string> keys;
                 for (const auto& [k, v] : entry.mutable_params.items()) keys.push_back(k);
                 return fmt::format("{}", fmt::join(keys, ", "));
               }());
    for (auto& x : space)
      if (x.key == d.key) {
        x = std::move(d);
        return;
      }
    space.push_back(std::move(d));
  };
  for (const auto& [k, v] : entry.search.items()) put(search_dimension_from(k, v));
  for (const auto& item : space_items) {
    const auto eq = item.find('=');
    if (eq == std::string::npos || eq == 0) D5_THROW(InvalidArgument, "--space '{}' is not KEY=SPEC", item);
    put(parse_search_dimension(item.substr(0, eq), item.substr(eq + 1)));
  }
  return space;
}

Params sample_configuration(const SearchSpace& space, std::mt19937_64& rng) {
  Params config = Params::object();
  for (const auto& d : space) {
    const double u = unit(rng);
    switch (d.kind) {
      case SearchDimension::Kind::choice:
        config[d.key] = d.choices[std::min(d.choices.size() - 1, static_cast<size_t>(u * d.choices.size()))];
        break;
      case SearchDimension::Kind::uniform:
        config[d.key] = std::clamp(three_significant_digits(d.low + u * (d.high - d.low)), d.low, d.high);
        break;
      case SearchDimension::Kind::log_uniform:
        config[d.key] = std::clamp(
            three_significant_digits(std::exp(std::log(d.low) + u * (std::log(d.high) - std::log(d.low)))), d.low, d.high);
        break;
      case SearchDimension::Kind::integer:
        config[d.key] = static_cast<int64_t>(std::min(d.high, d.low + std::floor(u * (d.high - d.low + 1))));
        break;
      case SearchDimension::Kind::log_integer: {
        const double v = std::round(std::exp(std::log(d.low) + u * (std::log(d.high) - std::log(d.low))));
        config[d.key] = static_cast<int64_t>(std::clamp(v, d.low, d.high));
        break;
      }
    }
  }
  return config;
}

}  // namespace d5
