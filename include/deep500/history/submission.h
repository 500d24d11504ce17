#pragma once
// Submissions to a ranked list (docs/db.md#submissions): the result bundle of one recipe run
// (`d5 run`'s results directory: run.json and every run's result file), checked before the result
// history keeps it.
//
// A bundle is trusted only as far as it can be re-derived. The recipe it ran must be the published
// one, byte for byte (its SHA-256); its runs must be the ones the recipe plans with the recorded
// --set overrides, seed and global options; every run's result file must be there and judge, by
// the recipe's own criteria, exactly as run.json says it did. What cannot be re-derived here (that
// the outputs come out of the recorded command lines) is checked by running them again
// (`d5 rerun --outputs-only`), on request.
#include <optional>
#include <string>
#include <vector>

#include "deep500/experiment/recipe.h"
#include "deep500/metrics/results.h"

namespace d5 {

struct BundleFile {
  std::string name;    // relative to the bundle's directory: "run.json", "lenet5-tta.json"
  std::string path;    // where it was read
  std::string sha256;  // of its bytes
};

// What a ranked list shows of one submission. The score follows the recipe's `score:`
// (recipe.h's RecipeScore): per run the worst value over its cases, over runs the median.
struct Submission {
  std::string id;  // SHA-256 over the bundle's files (names and hashes): the same bundle, the same id
  std::string recipe, recipe_hash, division;
  std::string submitter;
  std::string system;  // check_bundle sets the manifest's hostname; a submitter may name it otherwise
  std::string score_quantity;
  bool lower_is_better = true;
  std::optional<double> score;  // none: a run had no value (the submission is not ranked)
  std::string score_unit;       // the metric's unit ("s" for wall_time); "" for an extra fact
  std::string score_detail;     // how it was taken: "median of 3 run(s)" or why there is none
  std::string validity;         // VALID or INVALID (run.json's): INVALID submissions are listed, not ranked
  std::vector<std::string> invalid_reasons;
  bool outputs_verified = false;  // rerun with --outputs-only reproduced every output
  std::string backends;           // the runs' backends, comma-separated, in order of first use
  std::vector<BundleFile> files;  // run.json first
};

struct BundleCheck {
  Submission submission;
  std::vector<std::string> problems;  // empty: the bundle is accepted
  std::vector<std::string> checks;    // what was verified, one line each, for the user
  bool deterministic = false;         // the bundle ran with --deterministic (outputs can be rerun)
  std::string summary_path;           // run.json's path
};

// run.json of a bundle given as its directory or as the file itself.
std::string bundle_summary_path(const std::string& path);
// The recipe name run.json records (to find the published recipe by); "" when it has none.
std::string recorded_recipe_name(const std::string& path);

// Checks the bundle at `path` (a results directory, or its run.json) against the published
// recipe's text. Every problem found is listed (not only the first); IoError only when the
// bundle's run.json cannot be read at all.
BundleCheck check_bundle(const std::string& path, const std::string& published_recipe_text);

// A recipe run's score from run.json and its runs' result files (in `dir`).
void score_submission(const Recipe& recipe, const Results& summary, const std::string& dir, Submission& s);

}  // namespace d5
