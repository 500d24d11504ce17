// Ranked lists: grouping by recipe version and division, the score's direction, ties in the order
// of submission, and submissions that are listed but not ranked.
#include <gtest/gtest.h>

#include "deep500/history/ranked_list.h"

namespace d5 {
namespace {

DbSubmission sub(const std::string& id, const std::string& recipe, const std::string& hash, const std::string& division,
                 std::optional<double> score, bool lower_is_better = true, const std::string& validity = "VALID") {
  DbSubmission d;
  d.submission.id = id;
  d.submission.recipe = recipe;
  d.submission.recipe_hash = hash;
  d.submission.division = division;
  d.submission.score = score;
  d.submission.score_detail = score ? "one run" : "run a has no value of time_to_target";
  d.submission.score_quantity = "time_to_target";
  d.submission.lower_is_better = lower_is_better;
  d.submission.validity = validity;
  if (validity != "VALID") d.submission.invalid_reasons = {"lenet5 on torch: CI wider than 2%"};
  return d;
}

std::vector<std::string> ids(const std::vector<DbSubmission>& v) {
  std::vector<std::string> out;
  for (const auto& d : v) out.push_back(d.submission.id);
  return out;
}

TEST(RankedList, OnePerRecipeVersionAndDivisionBestFirstTiesInSubmissionOrder) {
  const auto lists = ranked_lists({
      sub("a", "tta", "h1", "closed", 30.0),
      sub("b", "tta", "h1", "closed", 12.5),
      sub("c", "tta", "h1", "open", 9.0),
      sub("d", "tta", "h2", "closed", 1.0),  // another version of the recipe: another experiment
      sub("e", "tta", "h1", "closed", 12.5),  // ties with b, submitted later
      sub("f", "tta", "h1", "closed", 2.0, true, "INVALID"),
      sub("g", "tta", "h1", "closed", std::nullopt),
      sub("h", "alpha", "h3", "closed", 5.0),
  });
  ASSERT_EQ(lists.size(), 4u);
  EXPECT_EQ(lists[0].recipe, "alpha");
  EXPECT_EQ(lists[1].recipe_hash, "h1");
  EXPECT_EQ(lists[1].division, "closed");
  EXPECT_EQ(ids(lists[1].ranked), (std::vector<std::string>{"b", "e", "a"}));
  EXPECT_EQ(ids(lists[1].unranked), (std::vector<std::string>{"f", "g"}));
  EXPECT_EQ(unranked_reason(lists[1].unranked[0]), "INVALID: lenet5 on torch: CI wider than 2%");
  EXPECT_EQ(unranked_reason(lists[1].unranked[1]), "no score: run a has no value of time_to_target");
  EXPECT_EQ(unranked_reason(lists[1].ranked[0]), "");
  EXPECT_EQ(lists[2].recipe_hash, "h2");
  EXPECT_EQ(lists[3].division, "open");
  EXPECT_EQ(ids(lists[3].ranked), (std::vector<std::string>{"c"}));
}

TEST(RankedList, HigherIsBetterRanksTheLargestFirst) {
  const auto lists = ranked_lists({sub("a", "acc", "h", "open", 0.91, false), sub("b", "acc", "h", "open", 0.97, false),
                                   sub("c", "acc", "h", "open", 0.95, false)});
  ASSERT_EQ(lists.size(), 1u);
  EXPECT_FALSE(lists[0].lower_is_better);
  EXPECT_EQ(ids(lists[0].ranked), (std::vector<std::string>{"b", "c", "a"}));
}

}  // namespace
}  // namespace d5
