// d5 train: a network trained on a dataset with an optimizer; loss and quality curves, time to
// target, throughput, checkpoints.
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <iostream>
#include <limits>
#include <optional>
#include <sstream>

#include <fmt/format.h>

#include "cli_common.h"
#include "deep500/backends/builtin.h"
#include "deep500/train/data_loader.h"
#include "deep500/dist/distributed_sampler.h"
#include "deep500/train/dataset.h"
#include "deep500/core/error.h"
#include "deep500/net/graph_executor.h"
#include "deep500/net/replaying_executor.h"
#include "deep500/train/loss_head.h"
#include "deep500/metrics/manifest.h"
#include "deep500/net/model_zoo.h"
#include "deep500/op/op_registry.h"
#include "deep500/train/optimizer.h"
#include "deep500/train/quality_target.h"
#include "deep500/metrics/reporter.h"
#include "deep500/train/samplers.h"
#include "deep500/train/trainer.h"
#include "interrupt.h"
#include "progress.h"
#include "train_dist.h"
#ifdef D5_HAVE_ONNX
#include "deep500/onnx/onnx_export.h"
#include "deep500/onnx/onnx_import.h"
#endif

namespace d5::cli {

namespace {

// The run's progress by steps on a terminal (Progress decides whether it draws). `total` is the
// planned number of steps; 0 when only a target or a time limit ends the run (nothing is drawn).
class TrainingProgressBar final : public TrainingEvent {
 public:
  TrainingProgressBar(bool allowed, int64_t total) : bar_(allowed), total_(total) {}
  bool after_batch(const TrainingProgress& p, const TensorMap&) override {
    if (total_ > 0)
      bar_.update(static_cast<size_t>(std::min(p.step, total_)), static_cast<size_t>(total_),
                  fmt::format("epoch {}, loss {:.4f}", p.epoch + 1, p.last_loss));
    return true;
  }
  void after_training(const TrainingProgress&) override { bar_.finish(); }

 private:
  Progress bar_;
  int64_t total_;
};

struct TrainOpts {
  OutputOptions out;
  std::string model, dataset, data_dir, train_split = "train", test_split = "test", train_range, test_range;
  std::vector<std::string> sets;  // key=value dataset options
  bool no_test = false;
  std::string optimizer = "sgd";
  double lr = 0.01, momentum = 0, weight_decay = 0, beta1 = 0, beta2 = 0, eps = 0;
  std::vector<std::string> hypers;  // key=value
  int64_t batch = 64, epochs = 0, steps = 0;
  std::string sampler = "shuffle";
  double target_accuracy = 0, time_limit = 0;
  std::string target;                // "top5>=0.9"
  std::string loss_head;             // empty: the zoo model's own loss (ZooModel::loss), else softmax-ce
  std::vector<std::string> quality;  // empty: the loss head's measures
  int64_t ignore_index = kDefaultIgnoreIndex;
  int64_t blank = 0;
  int64_t test_every_epochs = 1, test_every_steps = 0, train_accuracy_every = 1;
  std::string backend = "reference";
  std::string device;  // ExecutorOptions::device
  bool cuda_graphs = false;  // ExecutorOptions::cuda_graphs
  std::string checkpoint, resume, save_model;
  int64_t checkpoint_every = 0;
  int64_t prefetch = 2;
  DistOptions dist;
  CLI::App* cmd = nullptr;
};

std::unique_ptr<Dataset> open_split(const TrainOpts& o, const std::string& split, const std::string& range,
                                    uint64_t seed) {
  DatasetSpec spec;
  spec.name = o.dataset;
  spec.data_dir = o.data_dir;
  spec.split = split;
  spec.seed = seed;
  for (const auto& s : o.sets) spec.options.insert(split_key_value(s, "--set"));
  if (!range.empty()) spec.options["range"] = range;
  return open_dataset(spec);
}

Hyperparameters hyperparameters(const TrainOpts& o) {
  Hyperparameters h;
  // Only what the user gave: every optimizer keeps torch.optim's defaults for the rest.
  const std::pair<const char*, std::pair<const char*, double>> named[] = {
      {"--lr", {"lr", o.lr}},         {"--momentum", {"momentum", o.momentum}},
      {"--weight-decay", {"weight_decay", o.weight_decay}}, {"--beta1", {"beta1", o.beta1}},
      {"--beta2", {"beta2", o.beta2}}, {"--eps", {"eps", o.eps}}};
  for (const auto& [flag, kv] : named) {
    if (o.cmd->count(flag) > 0) h[kv.first] = kv.second;
  }
  for (const auto& [k, v] : parse_hyperparameters(o.hypers)) h[k] = v;
  return h;
}

struct TrainNetwork {
  Network network;
  std::string source;
  LossHead head;
};

// A zoo model is built for the dataset's sample shape and classes, a network from a file as it is;
// then the loss head (--loss, softmax-ce by default) is appended to its output.
TrainNetwork load_train_network(const TrainOpts& o, const Dataset& data, uint64_t seed) {
  const std::string& head = o.loss_head;
  LossHeadOptions ho{kZooLabels, kZooLoss, o.ignore_index, o.blank, {}};
  const auto descs = data.sample_descs();
  if (auto labels = descs.find(kDataLabels); labels != descs.end()) ho.label_shape = labels->second.shape.dims();
  // A translation set's decoded outputs are judged whole: exact match and BLEU, not per piece.
  const auto decoder = descs.find(kDataDecoderInput);
  auto head_for = [&](Network& net) {
    LossHead lh = append_loss_head(net, head, ho);
    if (decoder != descs.end()) lh.quality = {"exact_match", "bleu"};
    return lh;
  };
  if (std::filesystem::exists(o.model)) {
#ifdef D5_HAVE_ONNX
    ImportOptions io;
    io.batch = o.batch;
    Network net = import_onnx_file(o.model, io);
    LossHead lh = head_for(net);
    return {std::move(net), "onnx:" + o.model, std::move(lh)};
#else
    D5_THROW(NotBuilt, "'{}': this d5 was built without ONNX support (libonnx-dev), so it cannot load model "
             "files", o.model);
#endif
  }
  auto in = descs.find(kDataInput);
  D5_CHECK_ARG(in != descs.end(), "dataset '{}' produces no '{}' tensor to train on", data.name(), kDataInput);
  D5_CHECK_ARG(data.classes() > 0,
               "dataset '{}' has no class labels; the model zoo's networks are classifiers (train another network "
               "from an ONNX file with --loss)",
               data.name());
  ModelOptions mo;
  mo.batch = o.batch;
  mo.classes = data.classes();
  mo.vocabulary = data.vocabulary();
  mo.input_shape = in->second.shape.dims();
  if (decoder != descs.end() && decoder->second.shape.rank() == 1) mo.target_length = decoder->second.shape[0];
  mo.training = true;
  mo.seed = seed;
  Network net = build_model(o.model, mo);
  LossHead lh = head_for(net);
  return {std::move(net), "zoo:" + o.model, std::move(lh)};
}

std::string console_text(const Results& res, const TrainingResult& r) {
  std::ostringstream s;
  make_reporter("console")->write(res, s);
  s << fmt::format("\n{} steps, {} epochs completed, stopped: {}\n", r.steps, r.epochs_completed, to_string(r.stop_reason));
  s << fmt::format("training time {:.3f} s, test passes {:.3f} s, wall {:.3f} s, {:.1f} samples/s\n",
                   r.training_time_s, r.test_time_s, r.wall_time_s, r.throughput());
  if (!r.loss.empty()) s << fmt::format("final loss {:.5f}\n", r.loss.back().value);
  for (const auto& q : r.test_quality)
    if (!q.points.empty()) s << fmt::format("final test {} {:.4f}\n", q.measure, q.points.back().value);
  if (r.reached_target) {
    s << fmt::format("time to target {:.3f} s of training ({:.3f} s wall), step {}, epoch {}\n", r.time_to_target_s,
                     r.wall_time_to_target_s, r.target_step, r.target_epoch);
  }
  return s.str();
}

// Batches go straight to the device the executor reads them on (an operator executor whose input
// nodes run on a GPU): the loader's worker copies them there through page-locked buffers, beside
// the step in flight, and the executor copies no feed (docs/data-loader.md#device-batches).
DataLoaderOptions loader_options_for(GraphExecutor& executor, const TrainingOptions& to, int64_t prefetch) {
  DataLoaderOptions lo{prefetch, 1};
  for (const auto& [input, device] : executor.feed_devices(to.loss)) {
    if (device.kind == DeviceKind::cpu) continue;
    lo.devices[input == to.input ? kDataInput : input == to.labels ? kDataLabels : input] = device;
  }
  return lo;
}

TrainingOptions training_options(const TrainOpts& o, const LossHead& head, const std::shared_ptr<Communicator>& comm,
                                 bool writes) {
  TrainingOptions to;
  to.epochs = o.epochs;
  to.max_steps = o.steps;
  // A target or a time limit alone trains for as many epochs as it takes.
  if (to.epochs == 0 && to.max_steps == 0) to.max_steps = std::numeric_limits<int64_t>::max();
  if (!o.target.empty()) to.target = parse_quality_target(o.target);
  if (o.target_accuracy > 0) to.target = accuracy_target(o.target_accuracy);
  to.quality = o.quality.empty() ? head.quality : o.quality;
  to.ignore_index = o.ignore_index;
  to.blank = o.blank;
  to.time_limit_s = o.time_limit;
  to.test_every_epochs = o.test_every_epochs;
  to.test_every_steps = o.test_every_steps;
  to.train_accuracy_every = o.train_accuracy_every;
  // Only rank 0 writes checkpoints; the others hold the same parameters.
  to.checkpoint_path = writes ? o.checkpoint : "";
  to.checkpoint_every = writes ? o.checkpoint_every : 0;
  // Ranks must stop at the same step, or the others would wait in their next collective: rank 0's
  // clock and test pass decide for all (one byte broadcast per step with --time-limit, per test
  // pass with a target).
  if (comm)
    to.agree = [comm](bool mine) {
      uint8_t v = mine ? 1 : 0;
      comm->broadcast(&v, 1, DType::u8, 0);
      return v != 0;
    };
  return to;
}

// The steps the progress bar counts to (0: unknown, as with a time limit or target alone).
int64_t planned_steps(const TrainingOptions& to, int64_t samples, int64_t batch,
                      const std::shared_ptr<Communicator>& comm) {
  const int64_t ranks = comm ? comm->size() : 1;
  const int64_t per_epoch = samples / std::max<int64_t>(1, batch * ranks);
  int64_t total = to.epochs > 0 ? to.epochs * per_epoch : 0;
  if (to.max_steps > 0 && to.max_steps != std::numeric_limits<int64_t>::max())
    total = total > 0 ? std::min(total, to.max_steps) : to.max_steps;
  return total;
}

// The manifest's "extra": model, network and the data it trained and tested on.
nlohmann::json run_facts(const TrainOpts& o, const TrainNetwork& tn, const Dataset& train_set,
                         const Dataset* test_set) {
  nlohmann::json x = {{"model", o.model},
                      {"source", tn.source},
                      {"network", tn.network.summary()},
                      {"dataset", {{"name", o.dataset},
                                   {"data_dir", o.data_dir},
                                   {"train", {{"split", o.train_split}, {"range", o.train_range},
                                              {"samples", train_set.size()}}}}}};
  if (test_set)
    x["dataset"]["test"] = {{"split", o.test_split}, {"range", o.test_range}, {"samples", test_set->size()}};
  if (!o.resume.empty()) x["resumed_from"] = o.resume;
  return x;
}

// The loss a zoo model trains with (a CTC model's is ctc), softmax-ce for a network from a file.
std::string default_loss_head(const std::string& model) {
  if (std::filesystem::exists(model)) return "softmax-ce";
  for (const auto& m : zoo_models())
    if (m.name == model) return m.loss;
  return "softmax-ce";
}

int run_train(const TrainOpts& given, const GlobalOptions& g) {
  TrainOpts o = given;
  if (o.loss_head.empty()) o.loss_head = default_loss_head(o.model);
  register_builtin_operators();
  ExperimentSettings settings = settings_from(g);
  D5_CHECK_ARG(o.epochs > 0 || o.steps > 0 || o.time_limit > 0 || o.target_accuracy > 0 || !o.target.empty(),
               "say how long to train: --epochs, --steps, --time-limit, --target or --target-accuracy");
  // A malformed target fails before the datasets are opened or generated.
  if (!o.target.empty()) parse_quality_target(o.target);
  std::shared_ptr<Communicator> comm = dist_communicator(o.dist);
  const bool writes = !comm || comm->rank() == 0;
  const uint64_t data_seed = settings.stream("train/data").seed();
  auto train_set = open_split(o, o.train_split, o.train_range, data_seed);
  std::unique_ptr<Dataset> test_set;
  if (!o.no_test) test_set = open_split(o, o.test_split, o.test_range, data_seed);

  TrainNetwork tn = load_train_network(o, *train_set, settings.stream("train/init").seed());
  Network& net = tn.network;
  if (isatty(STDERR_FILENO)) std::cerr << "d5: " << net.summary() << "\n";
  ExecutorOptions eo;
  eo.deterministic = true;
  eo.device = o.device;
  eo.cuda_graphs = o.cuda_graphs;
  auto executor = make_executor(net, o.backend, eo);
  std::unique_ptr<Optimizer> optimizer = make_optimizer(o.optimizer, hyperparameters(o));
  DistributedOptimizer* dist = nullptr;
  if (comm) {
    const bool on_gpu = o.backend == "cuda" || o.device.rfind("cuda", 0) == 0;
    comm = communicator_for_tensors(comm, o.dist, on_gpu);
    auto wrapped = make_distributed_optimizer(o.dist.scheme, o.dist.given, std::move(optimizer), comm);
    dist = wrapped.get();
    optimizer = std::move(wrapped);
  }
  // A network's batch dimension is fixed: a last, smaller batch is left out of every epoch. With
  // --dist each rank takes its slice of a global batch of ranks x --batch.
  const uint64_t sampler_seed = settings.stream("train/sampler").seed();
  TrainingOptions to = training_options(o, tn.head, comm, writes);
  to.test_executor_options = eo;
  const DataLoaderOptions loader_options = loader_options_for(*executor, to, o.prefetch);
  DataLoader loader(*train_set,
                    comm ? make_distributed_sampler(o.sampler, *train_set, o.batch, sampler_seed, comm->rank(),
                                                    comm->size(), Distribution::partitioned)
                         : make_sampler(o.sampler, *train_set, o.batch, /*drop_last=*/true, sampler_seed),
                    loader_options);

  // One process stops cleanly on SIGINT/SIGTERM; the ranks of a distributed run are ended by their
  // launcher (docs/distributed.md#faults).
  std::optional<InterruptGuard> interrupt;
  if (!comm) {
    interrupt.emplace();
    to.interrupted = [] { return InterruptGuard::signal() != 0; };
  }
  Trainer trainer(*executor, loader, test_set.get(), *optimizer, to);
  trainer.add_event(std::make_shared<TrainingProgressBar>(writes && o.out.format != "json",
                                                          planned_steps(to, train_set->size(), o.batch, comm)));
  if (!o.resume.empty()) trainer.resume(o.resume);
  TrainingResult r = trainer.train();
  // Rank 0's test pass decided when to stop; every rank's exit code reports that verdict.
  if (comm && to.target) r.reached_target = to.agree(r.reached_target);
  if (dist != nullptr) dist->finish(net);
  if (writes && !o.save_model.empty()) {
#ifdef D5_HAVE_ONNX
    export_onnx_file(net, o.save_model);
#else
    D5_THROW(NotBuilt, "--save-model: this d5 was built without ONNX support (libonnx-dev)");
#endif
  }

  Results res;
  CaseResult c = training_case(net.name(), o.backend, to, r);
  c.params["batch"] = o.batch;
  c.params["optimizer"] = o.optimizer;
  c.params["sampler"] = o.sampler;
  c.params["prefetch"] = o.prefetch;
  for (const auto& [name, device] : loader_options.devices) c.params["loader_devices"][name] = device.to_string();
  c.params["loss_head"] = o.loss_head;
  if (o.cuda_graphs) c.params["cuda_graphs"] = replay_report_json(*executor);
  for (const auto& [k, v] : optimizer->hyperparameters()) c.params["hyperparameters"][k] = v;
  if (dist != nullptr) add_distributed_results(*comm, o.dist, *dist, r, c);
  if (!writes) {
    // Only rank 0 writes results and the model; every rank's exit code still says how it ended.
    Results own;
    own.cases.push_back(std::move(c));
    return exit_code_for(own);
  }
  res.cases.push_back(std::move(c));
  res.manifest = make_manifest(settings);
  res.manifest["extra"] = run_facts(o, tn, *train_set, test_set.get());
  emit_text(console_text(res, r), to_json(res), o.out);
  if (r.stop_reason == StopReason::interrupted) {
    const int sig = InterruptGuard::signal();
    std::cerr << fmt::format("d5: {} stopped training after step {}; results written{}\n", signal_name(sig),
                             trainer.progress().step,
                             o.checkpoint.empty() ? " (no --checkpoint: nothing to resume)"
                                                  : fmt::format(", resume with --resume {}", o.checkpoint));
    return kExitInterruptedBase + sig;
  }
  return exit_code_for(res);
}

}  // namespace

Command register_train(CLI::App& app, const GlobalOptions& g) {
  auto* cmd = app.add_subcommand("train",
                                 "Train a network on a dataset: loss and quality curves, time to a quality "
                                 "target, throughput, checkpoints");
  auto o = std::make_shared<TrainOpts>();
  o->cmd = cmd;
  cmd->add_option("--model", o->model, "A model zoo name (see 'd5 models list') or an ONNX file")
      ->required();
  cmd->add_option("--dataset", o->dataset, "Dataset format: mnist, npy, synthetic, ...")->required();
  cmd->add_option("--data-dir", o->data_dir, "Where the dataset's files are (default: the cache directory)");
  cmd->add_option("--train-split", o->train_split, "Split to train on")->default_val("train");
  cmd->add_option("--test-split", o->test_split, "Split to test on")->default_val("test");
  cmd->add_option("--train-range", o->train_range, "Samples B:E of the training split (dataset option range)");
  cmd->add_option("--test-range", o->test_range, "Samples B:E of the test split");
  cmd->add_option("--set", o->sets, "Dataset option KEY=VALUE, for both splits (repeatable; or comma-separated)")
      ->delimiter(',');
  cmd->add_flag("--no-test", o->no_test, "No test set: no test passes, no target");
  cmd->add_option("--optimizer", o->optimizer, "Optimizer (sgd, momentum, adam, torch-adam, ...)")
      ->default_val("sgd");
  cmd->add_option("--lr", o->lr, "Learning rate")->check(CLI::NonNegativeNumber);
  cmd->add_option("--momentum", o->momentum, "Momentum");
  cmd->add_option("--weight-decay", o->weight_decay, "Weight decay");
  cmd->add_option("--beta1", o->beta1, "Adam's beta1");
  cmd->add_option("--beta2", o->beta2, "Adam's beta2");
  cmd->add_option("--eps", o->eps, "Adam's, AdaGrad's, RMSProp's epsilon");
  cmd->add_option("--hyper", o->hypers, "Any other hyperparameter KEY=VALUE (repeatable)");
  cmd->add_option("--batch", o->batch, "Batch size")->check(CLI::PositiveNumber)->default_val(64);
  auto* epochs = cmd->add_option("--epochs", o->epochs, "Epochs to train")->check(CLI::PositiveNumber);
  cmd->add_option("--steps", o->steps, "Steps to train")->check(CLI::PositiveNumber)->excludes(epochs);
  cmd->add_option("--sampler", o->sampler, "ordered: the first samples in order; shuffle: reshuffled every epoch")
      ->check(CLI::IsMember({"ordered", "shuffle"}))
      ->default_val("shuffle");
  auto* target = cmd->add_option("--target", o->target,
                                  "Stop at the first test pass that meets this quality target, e.g. accuracy>=0.97, "
                                  "top5>=0.9, perplexity<=40; time to target");
  cmd->add_option("--target-accuracy", o->target_accuracy, "Same as --target accuracy>=FRACTION")
      ->check(CLI::Range(0.0, 1.0))
      ->excludes(target);
  cmd->add_option("--loss", o->loss_head, "Loss head appended to the network's output: softmax-ce, "
                  "sequence-ce, mse, ctc (default: the zoo model's own, softmax-ce for a network from a file)")
      ->check(CLI::IsMember(loss_head_names()));
  cmd->add_option("--quality", o->quality,
                  "Measures of every test pass, comma-separated: accuracy, top<k>, exact_match, perplexity, "
                  "word_perplexity, mse, mae, cer (default: the loss head's)")
      ->delimiter(',');
  cmd->add_option("--ignore-index", o->ignore_index,
                  "The label of padding positions, which sequence-ce and the measures skip")
      ->default_val(kDefaultIgnoreIndex);
  cmd->add_option("--blank", o->blank, "The CTC blank class of the ctc loss head and the cer measure")
      ->check(CLI::NonNegativeNumber)
      ->default_val(0);
  cmd->add_option("--time-limit", o->time_limit, "Stop after this many seconds of training")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--test-every", o->test_every_epochs, "Epochs between test passes (0: only at the end)")
      ->check(CLI::NonNegativeNumber)
      ->default_val(1);
  cmd->add_option("--test-every-steps", o->test_every_steps, "Also test every this many steps")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--train-accuracy-every", o->train_accuracy_every,
                  "Steps between training-accuracy samples (0: never)")
      ->check(CLI::NonNegativeNumber)
      ->default_val(1);
  cmd->add_option("--prefetch", o->prefetch, "Batches loaded ahead of training on a background thread (0: none)")
      ->check(CLI::NonNegativeNumber)
      ->default_val(2);
  cmd->add_option("--backend", o->backend, "Executor: reference, onednn, torch")->default_val("reference");
  cmd->add_option("--device", o->device,
                  "Where the torch executor keeps its tensors (cpu, cuda:0; docs/torch-executor.md#devices); other "
                  "executors refuse one");
  cmd->add_flag("--cuda-graphs", o->cuda_graphs,
                "Record the training step once as a CUDA graph and replay it (cuda executor; docs/cuda-graphs.md)");
  cmd->add_option("--checkpoint", o->checkpoint, "Save a checkpoint here at the end (and every --checkpoint-every)");
  cmd->add_option("--checkpoint-every", o->checkpoint_every, "Steps between checkpoints")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--resume", o->resume, "Continue the run saved in this checkpoint");
  cmd->add_option("--save-model", o->save_model, "Write the trained network as ONNX");
  add_dist_options(*cmd, o->dist);
  add_output_options(*cmd, o->out);
  return {cmd, [o, &g] { return run_train(*o, g); }};
}

}  // namespace d5::cli
