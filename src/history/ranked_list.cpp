// Ranked lists: submissions grouped by recipe version and division, ordered by score.
#include "deep500/history/ranked_list.h"

#include <algorithm>

#include <fmt/format.h>

namespace d5 {

std::string unranked_reason(const DbSubmission& d) {
  const Submission& s = d.submission;
  if (s.validity != "VALID")
    return s.invalid_reasons.empty() ? "INVALID" : fmt::format("INVALID: {}", s.invalid_reasons.front());
  if (!s.score) return "no score: " + s.score_detail;
  return "";
}

std::vector<RankedList> ranked_lists(const std::vector<DbSubmission>& submissions) {
  std::vector<RankedList> lists;
  for (const auto& d : submissions) {
    const Submission& s = d.submission;
    auto it = std::find_if(lists.begin(), lists.end(), [&](const RankedList& l) {
      return l.recipe == s.recipe && l.recipe_hash == s.recipe_hash && l.division == s.division;
    });
    if (it == lists.end()) {
      lists.push_back({s.recipe, s.recipe_hash, s.division, s.score_quantity, s.score_unit, s.lower_is_better, {}, {}});
      it = std::prev(lists.end());
    }
    if (it->unit.empty()) it->unit = s.score_unit;
    (unranked_reason(d).empty() ? it->ranked : it->unranked).push_back(d);
  }
  for (auto& l : lists) {
    // Stable: equal scores keep the order of submission, the earlier first.
    std::stable_sort(l.ranked.begin(), l.ranked.end(), [&](const DbSubmission& a, const DbSubmission& b) {
      return l.lower_is_better ? *a.submission.score < *b.submission.score : *a.submission.score > *b.submission.score;
    });
  }
  std::stable_sort(lists.begin(), lists.end(), [](const RankedList& a, const RankedList& b) {
    if (a.recipe != b.recipe) return a.recipe < b.recipe;
    return a.division < b.division;  // "closed" < "open"
  });
  return lists;
}

}  // namespace d5
