#pragma once
// The search space of `d5 tune` (docs/tune.md): for some of a recipe entry's mutable options, the
// values a search may give them. Written in a recipe's `search:` map or with `d5 tune --space`:
//   choice:32,64,128   one of the values (a YAML list means the same)
//   uniform:0.8:0.99   a number drawn uniformly from [low, high]
//   log:1e-4:1e-2      a number whose logarithm is uniform over [log low, log high]
//   int:16:256         an integer drawn uniformly from low..high
//   logint:16:256      an integer whose logarithm is uniform (then rounded)
// Drawn numbers keep three significant digits, so that a tuned recipe reads "lr: 0.00231".
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "deep500/experiment/recipe.h"

namespace d5 {

struct SearchDimension {
  enum class Kind { choice, uniform, log_uniform, integer, log_integer };
  std::string key;
  Kind kind = Kind::choice;
  std::vector<nlohmann::json> choices;  // Kind::choice
  double low = 0, high = 0;             // the others
};
using SearchSpace = std::vector<SearchDimension>;

// One dimension from its text form (above); FormatError naming the key and the forms otherwise.
SearchDimension parse_search_dimension(const std::string& key, const std::string& spec);
// A recipe's form: a list (a choice) or a text form.
SearchDimension search_dimension_from(const std::string& key, const nlohmann::json& value);
std::string to_string(const SearchDimension& d);

// The entry's `search:` map, with `--space KEY=SPEC` items replacing or adding dimensions.
// InvalidArgument when a key is not one of the entry's mutable options: a fixed option is the
// experiment (the division's rule), a grid option is swept already (pin it with --set to search it).
SearchSpace search_space_of(const RecipeEntry& entry, const std::vector<std::string>& space_items);

// One value per dimension, drawn with `rng` (the same seed draws the same configurations).
Params sample_configuration(const SearchSpace& space, std::mt19937_64& rng);

}  // namespace d5
