#pragma once
// One trial of `d5 tune`: a recipe entry run as a child d5 with a configuration and a resource,
// its result file read into the tuner's ranking (tuner.h). Kept apart from the command so that the
// objective's reading is one place.
#include <string>
#include <vector>

#include "cli_common.h"
#include "deep500/experiment/recipe.h"
#include "deep500/experiment/tuner.h"

namespace d5::cli {

// What a search minimizes. `to_target`: time_to_target or steps_to_target of a training entry's
// quality target (a trial that reaches it is final; one that does not ranks by the quality it
// reached); otherwise a quantity as criteria name it, the worst value over the run's cases.
struct TuneObjective {
  std::string quantity;
  bool lower_is_better = true;
  bool to_target = false;
};

struct TrialSetup {
  Recipe recipe;  // the tuned entry alone, with one seed
  std::vector<Override> sets;  // the user's --set, before each configuration's values
  std::string resource_key;    // epochs, steps, ...
  TuneObjective objective;
  // Time-to-target objectives: a trial trains at most this factor times the best time so far
  // (d5 train --time-limit); 0: never stopped early.
  double early_stop_factor = 0;
  GlobalOptions globals;
  std::string dir;         // trials' result files and logs
  std::string executable;  // d5
};

// "baseline-r2" or "trial-007-r0": file names of an evaluation's result and log.
std::string evaluation_id(const Evaluation& e, bool baseline);

// Runs the evaluation; errors of the trial become a failed EvaluationResult (tier 2) with the
// reason, errors of the setup (a key the recipe does not have) are thrown.
EvaluationResult run_trial(const TrialSetup& setup, const Evaluation& e, bool baseline);

}  // namespace d5::cli
