#pragma once
// Hyper-parameter search (docs/tune.md): random search, and asynchronous successive halving
// (ASHA; Li et al., "A System for Massively Parallel Hyperparameter Tuning", MLSys 2020) with
// early stopping. The tuner knows configurations, resources and rankings, never what a trial runs:
// an Evaluator does that (`d5 tune` runs a recipe entry in a child process).
//
// ASHA: configurations start on the lowest rung (the least resource, e.g. 1 epoch); whenever a
// slot is free, the best configuration of a rung that is in the top 1/eta of everything that rung
// has seen, and has not been promoted yet, moves up a rung (eta times the resource); when none
// can, a new configuration is drawn. Promoted trials run again from the start with the larger
// resource (d5 train runs are short and keeping checkpoints per trial costs more than it saves).
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "deep500/experiment/search_space.h"

namespace d5 {

struct TunerOptions {
  enum class Method { random, asha };
  Method method = Method::asha;
  double eta = 3;  // ASHA's reduction factor: the top 1/eta of a rung moves up, with eta times the resource
  double min_resource = 1, max_resource = 1;
  bool integer_resource = true;
  int64_t max_trials = 0;    // configurations drawn; 0: only the time budget limits them
  double time_budget_s = 0;  // no evaluation starts after this many seconds; 0: none
  int slots = 1;             // evaluations at once
  uint64_t seed = 0;         // of the configurations drawn
  // Evaluated first, at the full resource, as trial 0: what the search has to beat (the recipe's
  // own values). Not counted in max_trials.
  std::optional<Params> baseline;
};

// The resource of every rung, lowest first; the last is max_resource. Random search has one.
// InvalidArgument for an eta <= 1 or a min_resource outside (0, max_resource].
std::vector<double> rung_resources(const TunerOptions& o);

struct Evaluation {
  int64_t trial = 0;  // 0 is the baseline when there is one; drawn configurations count from 1
  size_t rung = 0;
  double resource = 0;
  Params config;
  // The best complete objective so far (lower is better): an evaluator may stop a trial that can
  // no longer beat it (d5 tune: a time limit for time-to-target objectives).
  std::optional<double> incumbent;
};

struct EvaluationResult {
  // Ranking, lower (tier, value) first. Tier 0: the objective was measured, value is it (lower is
  // better); tier 1: it was not but progress was (a target not reached yet: minus the quality
  // reached); tier 2: the evaluation failed.
  int tier = 2;
  double value = 0;
  // More resource would not change the outcome: the target was reached, the trial was stopped
  // early or failed. Final evaluations are complete and never promoted.
  bool final = false;
  std::string detail;
  nlohmann::json record = nlohmann::json::object();  // what the evaluator keeps (files, times)
};

struct TunedEvaluation {
  Evaluation evaluation;
  EvaluationResult result;
  bool baseline = false;
  bool complete = false;  // final, or at the full resource: its value stands for the configuration
  double started_s = 0, finished_s = 0;  // since the search began
};

struct TuningResult {
  std::vector<double> rungs;
  std::vector<TunedEvaluation> evaluations;  // in the order they finished
  std::optional<size_t> best;      // the complete tier-0 evaluation of least value (baseline included)
  std::optional<size_t> baseline;  // the baseline's evaluation
  int64_t trials_drawn = 0;
  double wall_s = 0;
  std::string stop_reason;  // "trials" (all drawn and nothing left to promote) or "time budget"
};

using Evaluator = std::function<EvaluationResult(const Evaluation&)>;

// Runs the search; `evaluate` is called from `slots` threads at once. An exception from it stops
// the search (running evaluations finish) and is rethrown.
TuningResult tune(const SearchSpace& space, const TunerOptions& options, const Evaluator& evaluate);

}  // namespace d5
