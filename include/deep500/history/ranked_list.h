#pragma once
// Ranked lists of submissions (docs/db.md#ranked-lists), in the spirit of the TOP500: one list per
// recipe (as published: its text's hash) and division, ordered by the recipe's score.
#include <string>
#include <vector>

#include "deep500/history/result_db.h"

namespace d5 {

struct RankedList {
  std::string recipe, recipe_hash, division;
  std::string quantity, unit;
  bool lower_is_better = true;
  std::vector<DbSubmission> ranked;    // best first; ties by submission time
  std::vector<DbSubmission> unranked;  // INVALID, or without a score: listed with unranked_reason
};

// Lists ordered by recipe, then recipe hash (the order submissions first used it), closed before
// open. Submissions of one recipe whose text differs are in separate lists: they ran different
// experiments.
std::vector<RankedList> ranked_lists(const std::vector<DbSubmission>& submissions);

// Why a submission is not ranked ("" when it is).
std::string unranked_reason(const DbSubmission& s);

}  // namespace d5
