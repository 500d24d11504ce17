#pragma once
// Level 2: the trainer (docs/training.md), after Deep500's test_training.
//
// A Trainer drives one network through an executor and an optimizer: the sampler picks each
// batch's indices, the training set assembles it, optimizer.step() runs forward, backward and the
// update. Along the way it records the loss curve, the training accuracy every k steps (from the
// logits the step already computed), the quality measures every k epochs (a pass over the test
// set; quality.h: accuracy, top-k, perplexity, mse ...), the time per step, throughput, and the
// time to reach a quality target (quality_target.h, "accuracy>=0.97").
//
// Test passes run on the training executor, whose network has a fixed batch dimension B (a network
// with Dropout nodes on an executor of its copy without them, sharing the parameters): the
// test set is cut into batches of B indices and a last, partial batch is padded by repeating its
// first index; only its real rows are counted (pad and mask). Networks whose inference depends on
// the batch composition (BatchNormalization in training mode) therefore see the padding rows.
//
// A network that reads a decoder input (kDataDecoderInput, a sequence-to-sequence model) is
// trained with teacher forcing but tested as it would be used: decoding greedily, one pass per
// target position, each feeding the best class so far back into the decoder input; the measures
// see the scores of the last pass (exact_match and bleu then judge the decoded sequences).
//
// Time to target counts training time only (steps, including fetching their batches), not the
// test passes that check the target; both are reported, and so is the wall time.
//
// Checkpoints hold the parameters, the optimizer's state, the sampler's position and the step and
// epoch counters (checkpoint.h's file format). A run resumed from a checkpoint draws the same
// batches and makes the same updates as the uninterrupted run: the parameters are bitwise equal.
#include <chrono>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "deep500/train/data_loader.h"
#include "deep500/train/dataset.h"
#include "deep500/net/graph_executor.h"
#include "deep500/metrics/metric.h"
#include "deep500/net/tensor_names.h"
#include "deep500/train/optimizer.h"
#include "deep500/train/quality.h"
#include "deep500/train/quality_target.h"
#include "deep500/metrics/results.h"
#include "deep500/train/sampler.h"

namespace d5 {

struct Checkpoint;  // checkpoint.h

struct TrainingOptions {
  int64_t epochs = 1;     // at most this many epochs; 0: no epoch limit (max_steps must be set)
  int64_t max_steps = 0;  // at most this many steps in all; 0: no step limit
  // The measures of every test pass (quality.h), the first one primary (progress, events); a
  // target's measure joins them when missing.
  std::vector<std::string> quality = {"accuracy"};
  int64_t ignore_index = kDefaultIgnoreIndex;  // the label of positions the measures skip
  int64_t blank = 0;                           // the CTC blank class (cer)
  // Stop at the first test pass that meets it; none: train to a limit.
  std::optional<QualityTarget> target;
  double time_limit_s = 0;  // stop when training time exceeds it; 0: no limit
  // Steps between training-accuracy samples (only when accuracy is a measure); 0: never.
  int64_t train_accuracy_every = 1;
  int64_t test_every_epochs = 1;     // epochs between test passes; 0: only the final one
  int64_t test_every_steps = 0;      // also test every this many steps; 0: not by steps
  bool final_test = true;            // a test pass at the end unless the last step was just tested
  // Graph tensors: what the batch feeds and what the step reads back.
  std::string input = kDataInput;
  std::string labels = kDataLabels;
  std::string logits = kZooLogits;
  std::string loss = kZooLoss;
  // The options of the executor test passes run on when the network has Dropout nodes (a copy
  // of it without them, on the training executor's backend); the training executor's otherwise.
  ExecutorOptions test_executor_options{.deterministic = true};
  // Save a checkpoint here every checkpoint_every steps and at the end; empty: none.
  std::string checkpoint_path;
  int64_t checkpoint_every = 0;
  // In a distributed run, turns a stop decision that depends on this rank (its clock against
  // time_limit_s, its test pass against the target) into one every rank shares, e.g. rank
  // 0's by broadcast. Called at the same points on every rank: before every step when there is a
  // time limit, after every test pass when there is a target. Empty: this process decides alone.
  std::function<bool(bool)> agree;
  // Asked before every step; true stops the run there (StopReason::interrupted): the checkpoint is
  // saved, no final test pass runs. For a process that handles SIGINT. Not with `agree`: each
  // rank would stop at a step of its own.
  std::function<bool()> interrupted;
};

// Where a run stands; passed to every event.
struct TrainingProgress {
  int64_t epoch = 0;    // 0-based epoch being trained (or just finished)
  int64_t step = 0;     // steps completed in all (a resumed run continues the count)
  int64_t samples = 0;  // training samples consumed in all
  double training_time_s = 0;  // steps so far, without test passes
  double wall_time_s = 0;      // since train() began
  double last_loss = std::numeric_limits<double>::quiet_NaN();
  // The last test pass's value of the primary measure (the target's, else the first).
  double last_test_quality = std::numeric_limits<double>::quiet_NaN();
};

// Hooks into a run. Every bool-returning hook stops the run when it returns false: the current
// step (or test pass) completes, after_training still fires, and the result says "event".
class TrainingEvent {
 public:
  virtual ~TrainingEvent() = default;
  virtual bool before_training(const TrainingProgress& /*p*/) { return true; }
  virtual void after_training(const TrainingProgress& /*p*/) {}
  virtual bool before_epoch(const TrainingProgress& /*p*/) { return true; }
  virtual bool after_epoch(const TrainingProgress& /*p*/) { return true; }
  virtual bool before_batch(const TrainingProgress& /*p*/, const Batch& /*batch*/) { return true; }
  virtual bool after_batch(const TrainingProgress& /*p*/, const TensorMap& /*outputs*/) { return true; }
  virtual bool before_test(const TrainingProgress& /*p*/) { return true; }
  // `value`: the primary measure's (TrainingProgress::last_test_quality).
  virtual bool after_test(const TrainingProgress& /*p*/, double /*value*/) { return true; }
};

struct CurvePoint {
  int64_t step = 0;
  int64_t epoch = 0;
  double training_time_s = 0;
  double value = 0;
};

// One quality measure's values over the test passes of a run.
struct QualityCurve {
  std::string measure;
  std::string unit;
  bool higher_is_better = true;
  std::vector<CurvePoint> points;
};

// Why training stopped: the epoch or step limit, the quality target, the time limit, an event
// that asked to stop, or an interruption (TrainingOptions::interrupted). to_string gives the names
// results carry ("time_limit"; "" for none).
enum class StopReason { none, epochs, steps, target, time_limit, event, interrupted };
const char* to_string(StopReason r);

struct TrainingResult {
  int64_t steps = 0;    // steps of this run (not counting those before a resume)
  int64_t samples = 0;  // samples of this run
  int64_t epochs_completed = 0;  // epochs run to their end, in all
  StopReason stop_reason = StopReason::none;
  std::vector<CurvePoint> loss;            // every step
  std::vector<CurvePoint> train_accuracy;  // every train_accuracy_every steps
  std::vector<QualityCurve> test_quality;  // per measure, in TrainingOptions::quality's order
  std::vector<double> step_times_s;        // per step: fetch, forward, backward, update
  std::vector<double> data_times_s;        // per step: the fetch part (a loader's wait)
  double training_time_s = 0;
  double test_time_s = 0;
  double wall_time_s = 0;
  bool reached_target = false;
  double time_to_target_s = 0;  // training time when the target was first met
  double wall_time_to_target_s = 0;
  int64_t target_step = 0, target_epoch = 0;  // where it was met (epoch 1-based: epochs begun)
  std::vector<MetricRecord> step_metrics;  // one per Trainer::add_step_metric, a sample per step
  double throughput() const { return training_time_s > 0 ? static_cast<double>(samples) / training_time_s : 0; }
  // A measure's test curve (empty when not measured) and its last value (NaN when none).
  const std::vector<CurvePoint>& test_curve(const std::string& measure) const;
  double final_test(const std::string& measure) const;
};

class Trainer {
 public:
  // Borrows everything; they must outlive the trainer. test_set may be null (no test passes;
  // a target accuracy then is an InvalidArgument). The sampler's batch size must equal the
  // network's batch dimension of `input`.
  Trainer(GraphExecutor& executor, const Dataset& train_set, const Dataset* test_set, Optimizer& optimizer,
          Sampler& sampler, TrainingOptions options);
  // Batches from a DataLoader instead (prefetching, transforms); the training set is its dataset.
  // Step times then count only the wait for a batch, not its production.
  Trainer(GraphExecutor& executor, DataLoader& loader, const Dataset* test_set, Optimizer& optimizer,
          TrainingOptions options);

  void add_event(std::shared_ptr<TrainingEvent> event) { events_.push_back(std::move(event)); }
  // Metrics begun before and ended after every step (WallTime, CpuTime, ...); their records are
  // TrainingResult::step_metrics and join training_case's metrics.
  void add_step_metric(std::unique_ptr<Metric> metric) { step_metrics_.add(std::move(metric)); }

  // Trains until a limit or the target is reached; callable once per Trainer.
  TrainingResult train();

  // Every measure of the network as it is now (a full pass over the test set), by name.
  std::map<std::string, double> test_quality();

  // Writes / reads parameters, optimizer state, sampler position and counters. resume() before
  // train() continues a run exactly; the network's parameters are overwritten in place.
  void save_checkpoint(const std::string& path) const;
  void resume(const std::string& path);

  const TrainingProgress& progress() const { return progress_; }
  const MetricSet& step_metrics() const { return step_metrics_; }
  int64_t batch_size() const { return batch_; }

 private:
  struct Run;
  bool run_epoch(Run& run);  // true when the epoch ran to its end
  void take_step(Run& run, const Batch& batch, std::chrono::steady_clock::time_point fetch_start);
  void end_epoch(Run& run);
  TrainingResult finish(Run& run);
  bool test_now(Run& run);       // false when an event asked to stop
  bool target_agreed(Run& run);  // every rank has seen the target reached
  bool agreed(bool mine) const;  // options_.agree, or mine alone
  void update_wall(const Run& run);
  bool fire(const std::function<bool(TrainingEvent&)>& hook);
  bool run_test(TrainingResult& result);  // false when an event asked to stop
  TensorMap feeds_of(const Batch& batch) const;
  // The logits of a test batch; a network with a decoder input decodes greedily.
  Tensor predict(TensorMap feeds);
  // What test passes run on: the training executor, or for a network with Dropout nodes an
  // executor of a copy without them, its parameters those of the training network.
  GraphExecutor& test_executor();
  void check_setup(int64_t source_batch, int64_t source_size);
  void check_labels(const Network& net) const;
  // The batch source: the sampler with the training set, or the loader.
  std::optional<Batch> next_batch();
  void begin_next_epoch();
  SamplerState position() const;
  int64_t batches_per_epoch();
  void set_position(const SamplerState& state);
  void restore_from(const Checkpoint& checkpoint, const std::string& path);

  GraphExecutor& executor_;
  const Dataset& train_set_;
  const Dataset* test_set_;
  Optimizer& optimizer_;
  Sampler* sampler_ = nullptr;
  DataLoader* loader_ = nullptr;
  TrainingOptions options_;
  int64_t batch_ = 0;
  TrainingProgress progress_;
  int64_t epochs_completed_ = 0;  // in all, across resumes
  std::vector<std::shared_ptr<TrainingEvent>> events_;
  MetricSet step_metrics_;
  bool trained_ = false;
  std::unique_ptr<Network> test_network_;
  std::unique_ptr<GraphExecutor> test_executor_;
};

// Deep500's entry point: a Trainer with the given events, trained once.
TrainingResult test_training(GraphExecutor& executor, const Dataset& train_set, const Dataset* test_set,
                             Optimizer& optimizer, Sampler& sampler, const TrainingOptions& options,
                             const std::vector<std::shared_ptr<TrainingEvent>>& events = {});
TrainingResult test_training(GraphExecutor& executor, DataLoader& loader, const Dataset* test_set,
                             Optimizer& optimizer, const TrainingOptions& options,
                             const std::vector<std::shared_ptr<TrainingEvent>>& events = {});

// The result as a results case: metrics step_time (s), throughput (samples/s), loss,
// training_accuracy, test_<measure> per quality measure (test_accuracy, test_perplexity ...),
// time_to_target (s; absent unless reached); the curves, final values (final_test_<measure>) and
// counters in extra. State Passed, or Failed when a target was set and not reached.
CaseResult training_case(const std::string& name, const std::string& backend, const TrainingOptions& options,
                         const TrainingResult& result);

}  // namespace d5
