// The training loop: batches from the sampler, steps through the optimizer, test passes, limits.
#include "deep500/train/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "deep500/core/error.h"

namespace d5 {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// The measures of the options, with the target's appended when the list lacks it.
std::vector<std::string> measures_of(const TrainingOptions& o) {
  std::vector<std::string> m = o.quality;
  if (o.target && std::find(m.begin(), m.end(), o.target->measure) == m.end()) m.push_back(o.target->measure);
  return m;
}

}  // namespace

const std::vector<CurvePoint>& TrainingResult::test_curve(const std::string& measure) const {
  static const std::vector<CurvePoint> none;
  for (const auto& c : test_quality)
    if (c.measure == measure) return c.points;
  return none;
}

double TrainingResult::final_test(const std::string& measure) const {
  const auto& c = test_curve(measure);
  return c.empty() ? std::numeric_limits<double>::quiet_NaN() : c.back().value;
}

const char* to_string(StopReason r) {
  switch (r) {
    case StopReason::epochs: return "epochs";
    case StopReason::steps: return "steps";
    case StopReason::target: return "target";
    case StopReason::time_limit: return "time_limit";
    case StopReason::event: return "event";
    case StopReason::interrupted: return "interrupted";
    case StopReason::none: break;
  }
  return "";
}

Trainer::Trainer(GraphExecutor& executor, const Dataset& train_set, const Dataset* test_set, Optimizer& optimizer,
                 Sampler& sampler, TrainingOptions options)
    : executor_(executor),
      train_set_(train_set),
      test_set_(test_set),
      optimizer_(optimizer),
      sampler_(&sampler),
      options_(std::move(options)) {
  check_setup(sampler.batch_size(), sampler.dataset_size());
}

Trainer::Trainer(GraphExecutor& executor, DataLoader& loader, const Dataset* test_set, Optimizer& optimizer,
                 TrainingOptions options)
    : executor_(executor),
      train_set_(loader.dataset()),
      test_set_(test_set),
      optimizer_(optimizer),
      loader_(&loader),
      options_(std::move(options)) {
  check_setup(loader.batch_size(), loader.dataset().size());
}

void Trainer::check_setup(int64_t source_batch, int64_t source_size) {
  const TrainingOptions& o = options_;
  D5_CHECK_ARG(o.epochs >= 0 && o.max_steps >= 0, "epochs ({}) and steps ({}) cannot be negative", o.epochs,
               o.max_steps);
  D5_CHECK_ARG(o.epochs > 0 || o.max_steps > 0, "training needs a limit: a number of epochs or of steps");
  D5_CHECK_ARG(!o.target || test_set_ != nullptr, "a target ({}) needs a test set",
               o.target ? o.target->to_string() : "");
  const std::vector<std::string> measures = measures_of(o);
  D5_CHECK_ARG(!measures.empty() || test_set_ == nullptr,
               "no quality measure to take in test passes; name at least one (e.g. accuracy)");
  for (size_t i = 0; i < measures.size(); ++i) {
    make_quality_measure(measures[i]);  // an unknown name fails here, before any step
    D5_CHECK_ARG(measures[i] != "word_perplexity" || (test_set_ && !test_set_->word_starts().empty()),
                 "word_perplexity needs a test set whose classes are word pieces (wordnet-glosses with "
                 "task=next-piece); '{}' has none: use perplexity",
                 test_set_ ? test_set_->name() : "no test set");
    D5_CHECK_ARG(measures[i] != "bleu" || (test_set_ && test_set_->end_token() >= 0),
                 "bleu needs a test set of target sequences that end with an end token (number-words); '{}' has "
                 "none: use exact_match or accuracy",
                 test_set_ ? test_set_->name() : "no test set");
    D5_CHECK_ARG(!measures[i].starts_with("map") || executor_.network().is_initializer(kZooAnchors),
                 "{} decodes a single-shot detector's predictions from its anchors, and network '{}' has no constant "
                 "'{}' (train detector-ssd from the model zoo)",
                 measures[i], executor_.network().name(), kZooAnchors);
    D5_CHECK_ARG(std::find(measures.begin(), measures.begin() + static_cast<std::ptrdiff_t>(i), measures[i]) ==
                     measures.begin() + static_cast<std::ptrdiff_t>(i),
                 "quality measure '{}' is named twice", measures[i]);
  }
  D5_CHECK_ARG(o.time_limit_s >= 0, "time limit {} s is negative", o.time_limit_s);
  D5_CHECK_ARG(o.train_accuracy_every >= 0 && o.test_every_epochs >= 0 && o.test_every_steps >= 0 &&
                   o.checkpoint_every >= 0,
               "intervals (accuracy, test, checkpoint) cannot be negative");
  D5_CHECK_ARG(o.checkpoint_every == 0 || !o.checkpoint_path.empty(),
               "checkpoints every {} steps need a checkpoint path", o.checkpoint_every);
  D5_CHECK_ARG(!o.interrupted || !o.agree,
               "an interruption stops one process at a step of its own: not in a run whose ranks agree on stopping");

  Network& net = executor_.network();
  if (!net.inferred()) net.infer();
  const auto& inputs = net.inputs();
  D5_CHECK_ARG(std::find(inputs.begin(), inputs.end(), o.input) != inputs.end(),
               "network '{}' has no graph input '{}' for the samples", net.name(), o.input);
  const Shape& in_shape = net.desc(o.input).shape;
  D5_CHECK_ARG(in_shape.rank() >= 1, "graph input '{}' has no batch dimension", o.input);
  batch_ = in_shape[0];
  D5_CHECK_ARG(source_batch == batch_,
               "the sampler draws batches of {} samples but network '{}' takes batches of {} ('{}' is {})",
               source_batch, net.name(), batch_, o.input, in_shape.to_string());
  D5_CHECK_ARG(source_size == train_set_.size(), "the sampler was made for {} samples but training set '{}' has {}",
               source_size, train_set_.name(), train_set_.size());
  check_labels(net);
  const auto& outputs = net.outputs();
  for (const std::string& t : {o.loss, o.logits}) {
    D5_CHECK_ARG(std::find(outputs.begin(), outputs.end(), t) != outputs.end(),
                 "network '{}' has no graph output '{}' (outputs: {})", net.name(), t, fmt::join(outputs, ", "));
  }
}

// The dataset's labels must be what the loss head takes: a class per sample for softmax-ce, a
// class per position for sequence-ce, f32 targets shaped like the prediction for mse.
void Trainer::check_labels(const Network& net) const {
  const auto& inputs = net.inputs();
  if (std::find(inputs.begin(), inputs.end(), options_.labels) == inputs.end()) return;
  const auto descs = train_set_.sample_descs();
  auto sample = descs.find(kDataLabels);
  if (sample == descs.end()) return;  // feeds_of names the missing tensor at the first step
  std::vector<int64_t> dims{batch_};
  for (int64_t d : sample->second.shape.dims()) dims.push_back(d);
  const TensorDesc& want = net.desc(options_.labels);
  D5_CHECK_ARG(want.dtype == sample->second.dtype && want.shape == Shape(dims),
               "dataset '{}' gives labels {} per batch but network '{}' takes '{}' as {}; pick the loss head that "
               "reads these labels (softmax-ce: a class per sample, sequence-ce: a class per position, mse: f32 "
               "targets shaped like the prediction)",
               train_set_.name(), TensorDesc{sample->second.dtype, Shape(dims)}.to_string(), net.name(),
               options_.labels, want.to_string());
}

bool Trainer::fire(const std::function<bool(TrainingEvent&)>& hook) {
  bool go_on = true;
  for (auto& e : events_) go_on = hook(*e) && go_on;
  return go_on;
}

std::optional<Batch> Trainer::next_batch() {
  if (loader_) {
    std::optional<Batch> b = loader_->next();
    if (b) {
      const auto n = static_cast<int64_t>(loader_->last_indices().size());
      D5_CHECK_ARG(n == batch_,
                   "the loader handed out a batch of {} samples but the network takes {}: a network with a fixed "
                   "batch size needs a sampler with drop_last",
                   n, batch_);
    }
    return b;
  }
  const std::vector<int64_t> indices = sampler_->next();
  if (indices.empty()) return std::nullopt;
  D5_CHECK_ARG(static_cast<int64_t>(indices.size()) == batch_,
               "the sampler handed out a batch of {} samples but the network takes {}: a network with a fixed "
               "batch size needs a sampler with drop_last",
               indices.size(), batch_);
  return train_set_.fetch(indices);
}

void Trainer::begin_next_epoch() {
  if (loader_) {
    loader_->start_next_epoch();
  } else {
    sampler_->reset();
  }
}

int64_t Trainer::batches_per_epoch() { return loader_ ? loader_->batches_per_epoch() : sampler_->batches_per_epoch(); }

SamplerState Trainer::position() const { return loader_ ? loader_->state() : sampler_->state(); }

void Trainer::set_position(const SamplerState& state) {
  if (loader_) {
    loader_->restore(state);
  } else {
    sampler_->restore(state);
  }
}

TensorMap Trainer::feeds_of(const Batch& batch) const {
  TensorMap feeds;
  for (const std::string& name : executor_.network().inputs()) {
    const std::string key = name == options_.input ? kDataInput : name == options_.labels ? kDataLabels : name;
    auto it = batch.find(key);
    D5_CHECK_ARG(it != batch.end(), "the batch has no tensor '{}' for graph input '{}' of network '{}'", key, name,
                 executor_.network().name());
    feeds[name] = it->second;
  }
  return feeds;
}

GraphExecutor& Trainer::test_executor() {
  Network& net = executor_.network();
  std::vector<std::string> dropouts;
  for (const Node& n : net.nodes())
    if (n.op_type == "Dropout") dropouts.push_back(n.name);
  if (dropouts.empty()) return executor_;
  if (!test_executor_) {
    // A copy of the training network without its Dropout nodes (each output read from its input
    // instead): a test pass measures the network, not one random subnetwork of it, and greedy
    // decoding needs the scores of a prefix to stay what they were. BatchNormalization built in
    // training mode keeps normalizing with batch statistics: such a network has no running ones.
    test_network_ = std::make_unique<Network>(net);
    for (const std::string& name : dropouts) {
      const Node dropout = test_network_->node(name);
      test_network_->remove_node(name);
      test_network_->replace_uses(dropout.outputs.at(0), dropout.inputs.at(0));
    }
    test_executor_ = make_executor(*test_network_, executor_.backend(), options_.test_executor_options);
  }
  // The copy shares the parameters' buffers until an executor or optimizer replaces one.
  for (const std::string& p : net.get_params()) {
    const Tensor trained = net.fetch_tensor(p);
    Tensor tested = test_network_->fetch_tensor(p);
    if (tested.data() != trained.data()) tested.copy_from(trained);
  }
  return *test_executor_;
}

Tensor Trainer::predict(TensorMap feeds) {
  GraphExecutor& executor = test_executor();
  auto logits_of = [&](const TensorMap& out) {
    auto prediction = out.find(options_.logits);
    D5_CHECK(prediction != out.end(), Internal, "inference produced no '{}'", options_.logits);
    return prediction->second;
  };
  auto decoder = feeds.find(kDataDecoderInput);
  if (decoder == feeds.end()) return logits_of(executor.inference(feeds));
  // Greedy decoding: the decoder reads its own best guesses instead of the target. Its attention
  // is causal, so after pass t the scores of positions up to t no longer change: pass t fills
  // position t + 1 of the decoder input with the best class at position t, and after the last
  // pass every position holds what a step-by-step greedy decoder would have scored there.
  Tensor input = decoder->second.clone();
  const Shape& s = input.shape();
  D5_CHECK_ARG(s.rank() == 2 && input.dtype() == DType::i64,
               "the decoder input '{}' must be i64 ids [batch, positions], got {}", kDataDecoderInput,
               input.desc().to_string());
  const int64_t rows = s[0], steps = s[1];
  auto* ids = input.data_as<int64_t>();
  for (int64_t t = 0;; ++t) {
    feeds[kDataDecoderInput] = input.clone();
    const Tensor scores = logits_of(executor.inference(feeds)).to(Device::cpu());
    if (t + 1 >= steps) return scores;
    D5_CHECK_ARG(scores.shape().rank() == 3 && scores.shape()[0] == rows && scores.shape()[1] == steps &&
                     scores.dtype() == DType::f32,
                 "a network with a decoder input [{}, {}] must score every position: '{}' is {}", rows, steps,
                 options_.logits, scores.desc().to_string());
    const int64_t classes = scores.shape()[2];
    const float* x = scores.data_as<float>();
    for (int64_t r = 0; r < rows; ++r) {
      const float* at = x + (r * steps + t) * classes;
      ids[r * steps + t + 1] = std::max_element(at, at + classes) - at;
    }
  }
}

std::map<std::string, double> Trainer::test_quality() {
  D5_CHECK_ARG(test_set_ != nullptr, "no test set to measure quality on");
  std::vector<std::unique_ptr<QualityMeasure>> measures;
  QualitySettings settings{options_.ignore_index, options_.blank, test_set_->word_starts(), test_set_->end_token()};
  const Network& net = executor_.network();
  if (net.is_initializer(kZooAnchors)) settings.anchors = net.fetch_tensor(kZooAnchors).to(Device::cpu());
  for (const std::string& name : measures_of(options_)) measures.push_back(make_quality_measure(name, settings));
  const int64_t n = test_set_->size();
  D5_CHECK_ARG(n > 0, "test set '{}' is empty", test_set_->name());
  std::vector<int64_t> indices(static_cast<size_t>(batch_));
  for (int64_t first = 0; first < n; first += batch_) {
    const int64_t rows = std::min(batch_, n - first);
    // Pad a last partial batch with its first sample; only the real rows are counted.
    for (int64_t i = 0; i < batch_; ++i) indices[static_cast<size_t>(i)] = i < rows ? first + i : first;
    const Batch b = test_set_->fetch(indices);
    const Tensor prediction = predict(feeds_of(b));
    for (auto& m : measures) m->observe_batch(prediction, b, rows);
  }
  std::map<std::string, double> values;
  for (const auto& m : measures) values[m->name()] = m->value();
  return values;
}

bool Trainer::run_test(TrainingResult& result) {
  if (!fire([&](TrainingEvent& e) { return e.before_test(progress_); })) return false;
  const auto t0 = Clock::now();
  const std::map<std::string, double> values = test_quality();
  result.test_time_s += seconds_since(t0);
  const std::vector<std::string> names = measures_of(options_);
  if (result.test_quality.empty()) {
    for (const std::string& name : names) {
      const auto m = make_quality_measure(name);
      result.test_quality.push_back({name, m->unit(), m->higher_is_better(), {}});
    }
  }
  for (auto& curve : result.test_quality)
    curve.points.push_back({progress_.step, progress_.epoch, progress_.training_time_s, values.at(curve.measure)});
  const std::string& primary = options_.target ? options_.target->measure : names.front();
  progress_.last_test_quality = values.at(primary);
  if (options_.target && !result.reached_target && options_.target->met_by(values.at(primary))) {
    result.reached_target = true;
    result.time_to_target_s = progress_.training_time_s;
    result.target_step = progress_.step;
    result.target_epoch = progress_.epoch + 1;
  }
  return fire([&](TrainingEvent& e) { return e.after_test(progress_, progress_.last_test_quality); });
}

// What one train() call keeps between its steps and epochs.
struct Trainer::Run {
  TrainingResult result;
  Clock::time_point wall0 = Clock::now();
  double time_before = 0;  // training time of a resumed checkpoint
  std::unique_ptr<QualityMeasure> train_acc;  // set when accuracy is a measure
  int64_t last_tested_step = -1;
  bool target_shared = false;  // every rank has agreed that the target was reached
  StopReason stop = StopReason::none;
  void stop_for(StopReason r) {
    if (stop == StopReason::none) stop = r;
  }
};

bool Trainer::agreed(bool mine) const { return options_.agree ? options_.agree(mine) : mine; }

void Trainer::update_wall(const Run& run) { progress_.wall_time_s = seconds_since(run.wall0); }

// Every rank tests at the same steps, so every rank asks here.
bool Trainer::target_agreed(Run& run) {
  if (!options_.target) return false;
  run.target_shared = run.target_shared || agreed(run.result.reached_target);
  return run.target_shared;
}

bool Trainer::test_now(Run& run) {
  update_wall(run);
  const bool go_on = run_test(run.result);
  run.last_tested_step = progress_.step;
  if (run.result.reached_target && run.result.wall_time_to_target_s == 0)
    run.result.wall_time_to_target_s = seconds_since(run.wall0);
  return go_on;
}

TrainingResult Trainer::train() {
  D5_CHECK_ARG(!trained_, "a Trainer trains once; make a new one (and resume() from a checkpoint) to go on");
  trained_ = true;
  const TrainingOptions& o = options_;
  Run run;
  run.time_before = progress_.training_time_s;
  const std::vector<std::string> measures = measures_of(o);
  if (o.train_accuracy_every > 0 && std::find(measures.begin(), measures.end(), "accuracy") != measures.end())
    run.train_acc = make_quality_measure("accuracy", QualitySettings{o.ignore_index, o.blank});
  if (!fire([&](TrainingEvent& e) { return e.before_training(progress_); })) run.stop_for(StopReason::event);
  while (run.stop == StopReason::none) {
    progress_.epoch = position().epoch;
    optimizer_.set_epoch(progress_.epoch);
    if (o.epochs > 0 && progress_.epoch >= o.epochs) {
      run.stop_for(StopReason::epochs);
    } else if (o.max_steps > 0 && progress_.step >= o.max_steps) {
      run.stop_for(StopReason::steps);
    } else if (position().batch == 0 && !fire([&](TrainingEvent& e) { return e.before_epoch(progress_); })) {
      // (A run resumed in the middle of an epoch has already begun it.)
      run.stop_for(StopReason::event);
    } else if (run_epoch(run)) {
      end_epoch(run);
    } else {
      break;
    }
  }
  return finish(run);
}

bool Trainer::run_epoch(Run& run) {
  const TrainingOptions& o = options_;
  while (run.stop == StopReason::none) {
    if (o.max_steps > 0 && progress_.step >= o.max_steps) {
      // The last step ended an epoch: finish it (its events and test pass) before stopping.
      if (position().batch >= batches_per_epoch()) return true;
      run.stop_for(StopReason::steps);
      return false;
    }
    if (o.interrupted && o.interrupted()) {
      run.stop_for(StopReason::interrupted);
      return false;
    }
    if (o.time_limit_s > 0 && agreed(progress_.training_time_s - run.time_before >= o.time_limit_s)) {
      run.stop_for(StopReason::time_limit);
      return false;
    }
    const auto t0 = Clock::now();
    const std::optional<Batch> batch = next_batch();
    if (!batch) return true;
    take_step(run, *batch, t0);
  }
  return false;
}

void Trainer::take_step(Run& run, const Batch& batch, std::chrono::steady_clock::time_point fetch_start) {
  const TrainingOptions& o = options_;
  TrainingResult& result = run.result;
  const TensorMap feeds = feeds_of(batch);
  const double data_time = seconds_since(fetch_start);
  double step_time = data_time;
  // Events run outside the timed parts.
  if (!fire([&](TrainingEvent& e) { return e.before_batch(progress_, batch); })) run.stop_for(StopReason::event);
  const auto t1 = Clock::now();
  step_metrics_.begin();
  const TensorMap outputs = optimizer_.step(executor_, feeds, o.loss);
  step_metrics_.end();
  step_time += seconds_since(t1);

  result.step_times_s.push_back(step_time);
  result.data_times_s.push_back(data_time);
  progress_.training_time_s += step_time;
  ++progress_.step;
  progress_.samples += batch_;
  ++result.steps;
  result.samples += batch_;
  auto loss = outputs.find(o.loss);
  D5_CHECK(loss != outputs.end(), Internal, "the training step returned no '{}'", o.loss);
  progress_.last_loss = loss->second.get(0);
  result.loss.push_back({progress_.step, progress_.epoch, progress_.training_time_s, progress_.last_loss});
  if (run.train_acc && progress_.step % o.train_accuracy_every == 0) {
    auto logits = outputs.find(o.logits);
    D5_CHECK(logits != outputs.end(), Internal, "the training step returned no '{}'", o.logits);
    // Labels the loader put on a device are read back for the metric (every train_accuracy_every steps).
    const Tensor& fed = feeds.at(o.labels);
    const Tensor labels = fed.on_host() ? fed : fed.to(Device::cpu());
    run.train_acc->reset();
    run.train_acc->observe(logits->second, labels, logits->second.shape()[0]);
    result.train_accuracy.push_back(
        {progress_.step, progress_.epoch, progress_.training_time_s, run.train_acc->value()});
  }
  update_wall(run);
  if (!fire([&](TrainingEvent& e) { return e.after_batch(progress_, outputs); })) run.stop_for(StopReason::event);
  if (o.checkpoint_every > 0 && progress_.step % o.checkpoint_every == 0) save_checkpoint(o.checkpoint_path);
  if (test_set_ && o.test_every_steps > 0 && progress_.step % o.test_every_steps == 0) {
    if (!test_now(run)) run.stop_for(StopReason::event);
    if (target_agreed(run)) run.stop_for(StopReason::target);
  }
}

void Trainer::end_epoch(Run& run) {
  const TrainingOptions& o = options_;
  ++epochs_completed_;
  update_wall(run);
  bool go_on = fire([&](TrainingEvent& e) { return e.after_epoch(progress_); });
  bool tested = false;
  if (test_set_ && o.test_every_epochs > 0 && (progress_.epoch + 1) % o.test_every_epochs == 0 &&
      run.last_tested_step != progress_.step) {
    go_on = test_now(run) && go_on;
    tested = true;
  }
  begin_next_epoch();
  if (!go_on) run.stop_for(StopReason::event);
  // Without a test pass here nothing changed since the last agreement.
  if (tested ? target_agreed(run) : run.target_shared) run.stop_for(StopReason::target);
}

TrainingResult Trainer::finish(Run& run) {
  const TrainingOptions& o = options_;
  // Neither an event nor an interruption that asked to stop wants a test pass more.
  if (test_set_ && o.final_test && run.last_tested_step != progress_.step && run.stop != StopReason::event &&
      run.stop != StopReason::interrupted)
    test_now(run);
  if (!o.checkpoint_path.empty()) save_checkpoint(o.checkpoint_path);
  TrainingResult& result = run.result;
  result.stop_reason = run.stop;
  result.epochs_completed = epochs_completed_;
  result.training_time_s = progress_.training_time_s - run.time_before;
  update_wall(run);
  result.wall_time_s = progress_.wall_time_s;
  result.step_metrics = step_metrics_.results();
  fire([&](TrainingEvent& e) {
    e.after_training(progress_);
    return true;
  });
  return std::move(result);
}

TrainingResult test_training(GraphExecutor& executor, const Dataset& train_set, const Dataset* test_set,
                             Optimizer& optimizer, Sampler& sampler, const TrainingOptions& options,
                             const std::vector<std::shared_ptr<TrainingEvent>>& events) {
  Trainer trainer(executor, train_set, test_set, optimizer, sampler, options);
  for (const auto& e : events) trainer.add_event(e);
  return trainer.train();
}

TrainingResult test_training(GraphExecutor& executor, DataLoader& loader, const Dataset* test_set,
                             Optimizer& optimizer, const TrainingOptions& options,
                             const std::vector<std::shared_ptr<TrainingEvent>>& events) {
  Trainer trainer(executor, loader, test_set, optimizer, options);
  for (const auto& e : events) trainer.add_event(e);
  return trainer.train();
}

}  // namespace d5
