// d5 divergence: two optimizers train two copies of one network on identical batches; per step,
// the l2 and l_inf norms of every parameter's difference (docs/divergence.md).
#include <algorithm>
#include <iostream>
#include <sstream>

#include <fmt/format.h>

#include "cli_common.h"
#include "deep500/backends/builtin.h"
#include "deep500/train/divergence.h"
#include "deep500/core/error.h"
#include "deep500/train/lr_schedule.h"
#include "deep500/metrics/manifest.h"
#include "deep500/op/op_registry.h"
#include "net_loader.h"

namespace d5::cli {

namespace {

struct DivergenceOpts {
  OutputOptions out;
  std::string model, optimizer = "adam", twin, backend = "reference", dataset, data_dir, schedule;
  int64_t steps = 10, batch = 8, classes = 0;
  double lr = -1;
  std::vector<std::string> hyper;
  bool per_param = false;
};

// The class count for random labels: --classes, else the last extent of the network's "logits".
int64_t classes_of(const Network& net, int64_t given) {
  if (given > 0) return given;
  net.infer();
  for (const auto& name : {"logits", "output"}) {
    if (net.producer(name) == nullptr) continue;
    const auto& dims = net.desc(name).shape.dims();
    if (!dims.empty()) return dims.back();
  }
  for (const auto& in : net.inputs())
    D5_CHECK_ARG(is_floating(net.desc(in).dtype), "network input '{}' is {}: give --classes for random labels", in,
                 net.desc(in).to_string());
  return 0;
}

nlohmann::json report_json(const DivergenceReport& r, bool per_param) {
  nlohmann::json steps = nlohmann::json::array();
  for (const auto& s : r.steps) {
    nlohmann::json j = {{"step", s.step},   {"loss_a", s.loss_a},     {"loss_b", s.loss_b},
                        {"l2", s.total.l2}, {"linf", s.total.linf}};
    if (per_param)
      for (const auto& [p, d] : s.params) j["params"][p] = {{"l2", d.l2}, {"linf", d.linf}};
    steps.push_back(std::move(j));
  }
  return {{"optimizer", r.optimizer}, {"twin", r.twin},     {"backend", r.backend},
          {"parameters", r.parameters}, {"steps", steps}};
}

// A results file (docs/results-format.md) with one case: the report in its extra, and the norms a
// recipe's criteria read (l2_final, linf_final, l2_max, linf_max: the whole model's, over the steps).
Results divergence_results(const DivergenceReport& r, nlohmann::json report, nlohmann::json manifest) {
  CaseResult c;
  c.name = fmt::format("{} vs {}", r.optimizer, r.twin);
  c.level = "L2";
  c.backend = r.backend;
  c.params = {{"model", report["model"]}, {"batch", report["batch"]}, {"optimizer", r.optimizer}, {"twin", r.twin},
              {"steps", r.steps.size()}};
  double l2_max = 0, linf_max = 0;
  for (const auto& s : r.steps) {
    l2_max = std::max(l2_max, s.total.l2);
    linf_max = std::max(linf_max, s.total.linf);
  }
  c.extra = std::move(report);
  c.extra["l2_max"] = l2_max;
  c.extra["linf_max"] = linf_max;
  if (!r.steps.empty()) {
    c.extra["l2_final"] = r.steps.back().total.l2;
    c.extra["linf_final"] = r.steps.back().total.linf;
  }
  c.detail = fmt::format("{} steps; largest difference l2 {:.3g}, l_inf {:.3g}", r.steps.size(), l2_max, linf_max);
  Results out;
  out.manifest = std::move(manifest);
  out.cases.push_back(std::move(c));
  return out;
}

std::string report_text(const DivergenceReport& r, bool per_param) {
  std::ostringstream s;
  s << fmt::format("trajectory divergence of {} and {} on the {} executor ({} parameters)\n", r.optimizer, r.twin,
                   r.backend, r.parameters);
  s << fmt::format("{:>6} {:>14} {:>14} {:>14} {:>14}\n", "step", "loss " + r.optimizer, "loss " + r.twin,
                   "l2(diff)", "linf(diff)");
  for (const auto& st : r.steps) {
    s << fmt::format("{:>6} {:>14.6g} {:>14.6g} {:>14.6g} {:>14.6g}\n", st.step, st.loss_a, st.loss_b, st.total.l2,
                     st.total.linf);
    if (per_param)
      for (const auto& [p, d] : st.params) s << fmt::format("{:>8}{:<40} {:>14.6g} {:>14.6g}\n", "", p, d.l2, d.linf);
  }
  return s.str();
}

int run_divergence(const DivergenceOpts& o, const GlobalOptions& g) {
  register_builtin_operators();
  ExperimentSettings settings = settings_from(g);
  DivergenceOptions d;
  d.optimizer = o.optimizer;
  d.twin = o.twin;
  if (d.twin.empty()) {
    d.twin = "torch-" + o.optimizer;
    bool known = false;
    for (const auto& [name, what] : optimizer_names()) known = known || name == d.twin;
    D5_CHECK_ARG(known, "optimizer '{}' has no native twin '{}': name the second optimizer with --twin", o.optimizer,
                 d.twin);
  }
  d.hyper = parse_hyperparameters(o.hyper);
  if (o.lr >= 0) d.hyper["lr"] = o.lr;
  if (!o.schedule.empty()) d.schedule = parse_lr_schedule(o.schedule);
  d.steps = o.steps;
  d.backend = o.backend;

  LoadedNetwork probe = load_network(o.model, o.batch, NetMode::TrainStep);
  D5_CHECK_ARG(!probe.loss.empty(), "'{}' has no loss tensor to train (use a model zoo name, or an ONNX file with a "
               "loss output)", o.model);
  d.loss = probe.loss;
  BatchSource batches;
  if (!o.dataset.empty()) {
    DatasetSpec spec;
    spec.name = o.dataset;
    spec.data_dir = o.data_dir;
    spec.seed = settings.stream("divergence/dataset").seed();
    batches = dataset_batches(std::shared_ptr<const Dataset>(open_dataset(spec)), o.batch);
  } else {
    batches = random_batches(probe.network, settings.stream("divergence/batches").seed(),
                             classes_of(probe.network, o.classes));
  }
  // Both copies come from the same loader call: identical initial parameters.
  const auto build = [&] { return load_network(o.model, o.batch, NetMode::TrainStep).network; };
  const DivergenceReport r = trajectory_divergence(build, batches, d);
  nlohmann::json j = report_json(r, o.per_param);
  j["model"] = o.model;
  j["batch"] = o.batch;
  j["hyperparameters"] = d.hyper;
  if (d.schedule) j["schedule"] = d.schedule->describe();
  j["data"] = o.dataset.empty() ? "random (seeded)" : o.dataset;
  emit_text(report_text(r, o.per_param), to_json(divergence_results(r, std::move(j), make_manifest(settings))), o.out);
  return kExitOk;
}

}  // namespace

Command register_divergence(CLI::App& app, const GlobalOptions& g) {
  auto* cmd = app.add_subcommand("divergence",
                                 "Train one network with two optimizers on identical data and report how far their "
                                 "parameters drift apart per step (l2, l_inf)");
  auto o = std::make_shared<DivergenceOpts>();
  cmd->add_option("--model", o->model, "A model zoo name or MODEL.onnx with a loss output")->required();
  cmd->add_option("--optimizer", o->optimizer, "The first optimizer (see docs/optimizers.md)");
  cmd->add_option("--twin", o->twin, "The second optimizer (default: torch-OPTIMIZER)");
  cmd->add_option("--steps", o->steps, "Training steps")->check(CLI::Range(int64_t{1}, int64_t{1000000}));
  cmd->add_option("--batch", o->batch, "Batch size")->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  cmd->add_option("--lr", o->lr, "Learning rate for both (default: each optimizer's)");
  cmd->add_option("--schedule", o->schedule,
                  "Learning-rate schedule for both: step:SIZE:GAMMA, cosine:T_MAX[:MIN_LR], "
                  "warmup:N:FACTOR[+SCHEDULE], optionally @epoch");
  cmd->add_option("--hyper", o->hyper, "Another hyperparameter for both, KEY=VALUE (repeatable)");
  cmd->add_option("--classes", o->classes, "Classes for random labels (default: the network's logits width)");
  cmd->add_option("--dataset", o->dataset, "Read batches from this dataset format instead of seeded random data");
  cmd->add_option("--data-dir", o->data_dir, "The dataset's directory");
  cmd->add_option("--backend", o->backend, "Graph executor both optimizers train through");
  cmd->add_flag("--per-param", o->per_param, "Also report every parameter's norms");
  add_output_options(*cmd, o->out);
  return {cmd, [o, &g] { return run_divergence(*o, g); }};
}

}  // namespace d5::cli
