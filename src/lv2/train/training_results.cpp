// A training run as a results case (results.h): summaries of the per-step series, the curves.
#include <cmath>

#include "deep500/core/error.h"
#include "deep500/train/trainer.h"

namespace d5 {

namespace {

std::vector<double> values(const std::vector<CurvePoint>& curve) {
  std::vector<double> v;
  v.reserve(curve.size());
  for (const auto& p : curve) v.push_back(p.value);
  return v;
}

nlohmann::json curve_json(const std::vector<CurvePoint>& curve) {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& p : curve) {
    j.push_back({{"step", p.step}, {"epoch", p.epoch}, {"training_time_s", p.training_time_s}, {"value", p.value}});
  }
  return j;
}

// "test accuracy 0.9712, perplexity 41.3000" (the last pass) for the detail line; "" without a test pass.
std::string final_values(const TrainingResult& r) {
  std::string s;
  for (const auto& c : r.test_quality) {
    if (c.points.empty()) continue;
    s += fmt::format("{}{} {:.4f}", s.empty() ? "test " : ", ", c.measure, c.points.back().value);
  }
  return s;
}

}  // namespace

CaseResult training_case(const std::string& name, const std::string& backend, const TrainingOptions& options,
                         const TrainingResult& r) {
  CaseResult c;
  c.name = name;
  c.level = "L2";
  c.backend = backend;
  c.params = {{"epochs", options.epochs},
              {"max_steps", options.max_steps},
              {"quality", options.quality},
              {"target", options.target ? options.target->to_string() : ""},
              {"time_limit_s", options.time_limit_s}};
  c.metrics.push_back(metric_record("step_time", "s", r.step_times_s));
  c.metrics.push_back(metric_record("data_time", "s", r.data_times_s));
  if (r.training_time_s > 0) c.metrics.push_back(metric_record("throughput", "samples/s", {r.throughput()}));
  c.metrics.push_back(metric_record("loss", "", values(r.loss)));
  if (!r.train_accuracy.empty()) c.metrics.push_back(metric_record("training_accuracy", "fraction", values(r.train_accuracy)));
  for (const auto& q : r.test_quality)
    if (!q.points.empty()) c.metrics.push_back(metric_record("test_" + q.measure, q.unit, values(q.points)));
  if (r.reached_target) c.metrics.push_back(metric_record("time_to_target", "s", {r.time_to_target_s}));
  c.metrics.insert(c.metrics.end(), r.step_metrics.begin(), r.step_metrics.end());

  nlohmann::json& x = c.extra;
  x["stop_reason"] = to_string(r.stop_reason);
  x["steps"] = r.steps;
  x["samples"] = r.samples;
  x["epochs_completed"] = r.epochs_completed;
  x["training_time_s"] = r.training_time_s;
  x["test_time_s"] = r.test_time_s;
  x["wall_time_s"] = r.wall_time_s;
  for (const auto& q : r.test_quality) {
    if (!q.points.empty() && !std::isnan(q.points.back().value)) x["final_test_" + q.measure] = q.points.back().value;
  }
  if (!r.loss.empty()) x["final_loss"] = r.loss.back().value;
  if (options.target) {
    x["target"] = options.target->to_string();
    x["reached_target"] = r.reached_target;
    if (r.reached_target) {
      x["time_to_target"] = {{"training_time_s", r.time_to_target_s},
                             {"wall_time_s", r.wall_time_to_target_s},
                             {"step", r.target_step},
                             {"epoch", r.target_epoch}};
    }
  }
  nlohmann::json curves = {{"loss", curve_json(r.loss)}, {"training_accuracy", curve_json(r.train_accuracy)}};
  for (const auto& q : r.test_quality) curves["test_" + q.measure] = curve_json(q.points);
  x["curves"] = std::move(curves);
  x["quality"] = nlohmann::json::array();
  for (const auto& q : r.test_quality)
    x["quality"].push_back({{"measure", q.measure}, {"unit", q.unit}, {"higher_is_better", q.higher_is_better}});

  const std::string finals = final_values(r);
  if (options.target && !r.reached_target) {
    c.state = CaseState::Failed;
    c.detail = fmt::format("target {} not reached{}{} (stopped: {})", options.target->to_string(),
                           finals.empty() ? "" : ": ", finals, to_string(r.stop_reason));
  } else {
    c.detail = finals.empty() ? fmt::format("{} steps (stopped: {})", r.steps, to_string(r.stop_reason))
                              : fmt::format("{} after {} steps (stopped: {})", finals, r.steps, to_string(r.stop_reason));
  }
  return c;
}

}  // namespace d5
