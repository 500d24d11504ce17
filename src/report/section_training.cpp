// Level 2: convergence curves of `d5 train` and optimizer trajectory divergence of
// `d5 divergence`.
#include <cmath>

#include <fmt/format.h>

#include "sections.h"

namespace d5::report {

using nlohmann::json;

namespace {

// Steps per epoch from the manifest's training split and the batch (the loader drops the last,
// partial batch); 0 when unknown.
double steps_per_epoch(const CaseRef& r) {
  const json& m = r.input->results.manifest;
  const int64_t batch = r.c->params.value("batch", int64_t{0});
  if (batch <= 0 || !m.contains("extra") || !m["extra"].contains("dataset")) return 0;
  const json& d = m["extra"]["dataset"];
  if (!d.contains("train") || !d["train"].contains("samples")) return 0;
  return std::floor(d["train"]["samples"].get<double>() / static_cast<double>(batch));
}

std::string stat_or_empty(const CaseResult& c, const std::string& metric) {
  const MetricRecord* m = find_metric(c, metric);
  return m ? metric_cell(*m) : "";
}

// Samples an accuracy was measured on: the test split, or one training batch.
double accuracy_samples(const CaseRef& r, const std::string& curve) {
  if (curve == "training_accuracy") return r.c->params.value("batch", 0.0);
  const json& m = r.input->results.manifest;
  if (!m.contains("extra") || !m["extra"].contains("dataset") || !m["extra"]["dataset"].contains("test")) return 0;
  return m["extra"]["dataset"]["test"].value("samples", 0.0);
}

// Wilson's 95% score interval for a fraction p of n trials (the accuracy's sampling error: the
// test split is a sample of the distribution it stands for).
std::pair<double, double> wilson(double p, double n) {
  if (!(n > 0)) return {p, p};
  const double z = 1.959963984540054, z2 = z * z;
  const double centre = (p + z2 / (2 * n)) / (1 + z2 / n);
  const double half = z / (1 + z2 / n) * std::sqrt(p * (1 - p) / n + z2 / (4 * n * n));
  return {std::max(0.0, centre - half), std::min(1.0, centre + half)};
}

json step_axis() {
  return {{"field", "step"}, {"type", "quantitative"}, {"axis", {{"tickMinStep", 1}, {"format", "d"}}}};
}

json zoomable(json spec) {
  spec["params"] = json::array({{{"name", "zoom"}, {"select", "interval"}, {"bind", "scales"}}});
  return spec;
}

}  // namespace

// "accuracy 0.9712, perplexity 41.3000": every final_test_<measure> of a case.
std::string final_quality(const json& extra) {
  std::string s;
  for (const auto& [key, value] : extra.items()) {
    if (!key.starts_with("final_test_") || !value.is_number()) continue;
    s += fmt::format("{}{} {:.4f}", s.empty() ? "" : ", ", key.substr(11), value.get<double>());
  }
  return s;
}

// Where the target was met, "1.234 s (step 40)"; older result files call it time_to_accuracy.
std::string time_to_target(const json& extra) {
  for (const char* key : {"time_to_target", "time_to_accuracy"}) {
    if (extra.contains(key) && extra[key].is_object())
      return fmt::format("{:.3f} s (step {})", extra[key].value("training_time_s", 0.0), extra[key].value("step", 0));
  }
  return "";
}

// Test-pass measures other than accuracy (perplexity, top5, mse ...), one panel each: they have
// their own scales and no single sampling-error model.
void add_other_measures(json points, Page& page) {
  if (points.empty()) return;
  json spec = base_spec(std::move(points));
  spec["mark"] = {{"type", "line"}, {"point", true}};
  spec["encoding"] = {{"x", {{"field", "epochs"}, {"type", "quantitative"}, {"title", "epochs"}}},
                      {"y", {{"field", "value"}, {"type", "quantitative"}, {"title", "test pass"}}},
                      {"row", {{"field", "measure"}, {"type", "nominal"}, {"title", ""}}},
                      {"color", {{"field", "run"}, {"type", "nominal"}}},
                      {"tooltip", json::array({{{"field", "run"}}, {{"field", "measure"}}, {{"field", "step"}},
                                               {{"field", "value"}, {"format", ".5g"}}})}};
  spec["resolve"] = {{"scale", {{"y", "independent"}}}};
  page.plot(std::move(spec), "Every other quality measure of the test passes against epochs, one panel per measure.");
}

void add_convergence(const ReportInputs& in, Page& page) {
  json accuracy = json::array(), loss = json::array(), others = json::array();
  std::vector<std::vector<std::string>> rows;
  for (const auto& r : all_cases(in)) {
    const json& e = r.c->extra;
    if (!e.contains("curves") || !e["curves"].is_object()) continue;
    const std::string run = r.c->name + " · " + series_of(r, in);
    const double spe = steps_per_epoch(r);
    for (const char* curve : {"test_accuracy", "training_accuracy"}) {
      if (!e["curves"].contains(curve)) continue;
      for (const auto& p : e["curves"][curve]) {
        const double step = p.value("step", 0.0);
        // Without the split's size, a point is placed at the end of its epoch.
        const double epochs = spe > 0 ? step / spe : p.value("epoch", 0.0) + 1;
        const double acc = p.value("value", 0.0), n = accuracy_samples(r, curve);
        const auto [lo, hi] = wilson(acc, n);
        accuracy.push_back({{"run", run}, {"curve", curve}, {"epochs", epochs}, {"step", step}, {"accuracy", acc},
                            {"lo", lo}, {"hi", hi},
                            {"accuracy [95% CI]", n > 0 ? fmt::format("{:.4f} [{:.4f}, {:.4f}] on {} samples", acc, lo, hi, n)
                                                        : fmt::format("{:.4f} (sample count unknown)", acc)},
                            {"training time (s)", p.value("training_time_s", 0.0)}});
      }
    }
    for (const auto& [curve, points] : e["curves"].items()) {
      if (!curve.starts_with("test_") || curve == "test_accuracy") continue;
      for (const auto& p : points) {
        const double step = p.value("step", 0.0);
        others.push_back({{"run", run}, {"measure", curve.substr(5)}, {"step", step},
                          {"epochs", spe > 0 ? step / spe : p.value("epoch", 0.0) + 1}, {"value", p.value("value", 0.0)}});
      }
    }
    if (e["curves"].contains("loss"))
      for (const auto& p : e["curves"]["loss"])
        loss.push_back({{"run", run}, {"time", p.value("training_time_s", 0.0)}, {"step", p.value("step", 0)},
                        {"loss", p.value("value", 0.0)}});
    rows.push_back({run, to_string(r.c->state), e.value("stop_reason", std::string()),
                    fmt::format("{}", e.value("steps", 0)), fmt::format("{}", e.value("epochs_completed", 0)),
                    stat_or_empty(*r.c, "step_time"), stat_or_empty(*r.c, "throughput"), final_quality(e),
                    e.value("target", std::string()), time_to_target(e)});
  }
  if (rows.empty()) return;
  page.section("convergence", "Convergence",
               "Training runs of d5 train: accuracy against epochs (test passes and training-accuracy samples), the "
               "run's other quality measures, and the loss of every step against training time. Drag to pan, scroll "
               "to zoom.");
  const json color = {{"field", "run"}, {"type", "nominal"}};
  if (!accuracy.empty()) {
    const json x = {{"field", "epochs"}, {"type", "quantitative"}, {"title", "epochs"}};
    const json y_title = "top-1 accuracy (95% CI)";
    json spec = base_spec(std::move(accuracy));
    spec["layer"] = json::array(
        {{{"mark", {{"type", "rule"}, {"opacity", 0.6}}},
          {"encoding", {{"x", x}, {"y", {{"field", "lo"}, {"type", "quantitative"}, {"title", y_title},
                                         {"scale", {{"domain", {0, 1}}}}}},
                        {"y2", {{"field", "hi"}}}, {"color", color}}}},
         zoomable({{"mark", {{"type", "line"}, {"point", true}}},
                   {"encoding", {{"x", x},
                                 {"y", {{"field", "accuracy"}, {"type", "quantitative"}, {"title", y_title}}},
                                 {"color", color},
                                 {"strokeDash", {{"field", "curve"}, {"type", "nominal"}, {"title", "measured on"}}},
                                 {"tooltip", json::array({{{"field", "run"}}, {{"field", "curve"}}, {{"field", "step"}},
                                                          {{"field", "epochs"}, {"format", ".2f"}},
                                                          {{"field", "accuracy [95% CI]"}}})}}}})});
    page.plot(std::move(spec),
              "Accuracy against epochs (solid: test split; dashed: training batches), with Wilson's 95% score "
              "interval for a fraction measured on that many samples.");
  }
  add_other_measures(std::move(others), page);
  if (!loss.empty()) {
    json spec = base_spec(std::move(loss));
    spec["mark"] = {{"type", "line"}, {"strokeWidth", 1}};
    spec["encoding"] = {{"x", {{"field", "time"}, {"type", "quantitative"}, {"title", "training time (s)"}}},
                        {"y", {{"field", "loss"}, {"type", "quantitative"}, {"title", "loss"}}},
                        {"color", color},
                        {"tooltip", json::array({{{"field", "run"}}, {{"field", "step"}},
                                                 {{"field", "time"}, {"format", ".3f"}, {"title", "training time (s)"}},
                                                 {{"field", "loss"}, {"format", ".5f"}}})}};
    page.plot(zoomable(std::move(spec)), "Loss of every step against training time (test passes excluded).");
  }
  page.table({"run", "state", "stopped by", "steps", "epochs", "step time: median [95% CI]", "throughput",
              "final test pass", "target", "time to target"},
             rows);
}

void add_divergence(const ReportInputs& in, Page& page) {
  bool any = false;
  for (const auto& i : in.inputs) {
    if (i.kind != ReportInputKind::Divergence) continue;
    const json& d = i.divergence;
    if (!any)
      page.section("divergence", "Optimizer divergence",
                   "Two optimizers train two copies of one network from identical parameters on identical batches "
                   "(d5 divergence): the l2 and l-infinity norms of the parameters' difference after every step, per "
                   "parameter and over all of them. Values of one deterministic run, so without CIs; exact zeros "
                   "cannot be drawn on the log scale and are left out.");
    any = true;
    const std::string title = fmt::format("{} vs {} on {} ({}, batch {})", d.value("optimizer", "?"),
                                          d.value("twin", "?"), d.value("model", std::string("?")),
                                          d.value("backend", "?"), d.contains("batch") ? d["batch"].dump() : "?");
    json norms = json::array(), losses = json::array();
    size_t zeros = 0;
    auto add = [&](double step, const std::string& param, const json& v) {
      for (const char* norm : {"l2", "linf"}) {
        if (!v.contains(norm) || !v[norm].is_number()) continue;
        const double x = v[norm].get<double>();
        if (x > 0) norms.push_back({{"step", step}, {"parameter", param}, {"norm", norm}, {"value", x}});
        else ++zeros;
      }
    };
    for (const auto& s : d["steps"]) {
      const double step = s.value("step", 0.0);
      add(step, "all parameters", s);
      if (s.contains("params") && s["params"].is_object())
        for (const auto& [p, v] : s["params"].items()) add(step, p, v);
      for (const auto& [key, who] : {std::pair{"loss_a", "optimizer"}, std::pair{"loss_b", "twin"}})
        if (s.contains(key) && s[key].is_number())
          losses.push_back({{"step", step}, {"optimizer", d.value(who, std::string(who))}, {"loss", s[key]}});
    }
    page.heading(title + " · " + display_path(i.path));
    if (!norms.empty()) {
      json spec = {{"data", {{"values", std::move(norms)}}},
                   {"facet", {{"column", {{"field", "norm"}, {"type", "nominal"}, {"title", nullptr}}}}},
                   {"resolve", {{"scale", {{"y", "independent"}}}}},
                   {"spec",
                    {{"width", 330}, {"height", 260},
                     {"mark", {{"type", "line"}, {"point", true}}},
                     {"encoding",
                      {{"x", step_axis()},
                       {"y", {{"field", "value"}, {"type", "quantitative"}, {"scale", {{"type", "log"}}},
                              {"axis", {{"format", ".0e"}}},
                              {"title", "norm of the parameters' difference"}}},
                       {"color", {{"field", "parameter"}, {"type", "nominal"}}},
                       {"tooltip", json::array({{{"field", "step"}}, {{"field", "parameter"}}, {{"field", "norm"}},
                                                {{"field", "value"}, {"format", ".3e"}}})}}}}}};
      page.plot(std::move(spec), fmt::format("l2 and l-infinity of the difference per step{}.",
                                             zeros ? fmt::format(" ({} exact zeros left out)", zeros) : ""));
    } else {
      page.paragraph("Every difference is exactly zero: the two trajectories are identical.");
    }
    if (!losses.empty()) {
      json spec = base_spec(std::move(losses), 640, 220);
      spec["mark"] = {{"type", "line"}, {"point", true}};
      spec["encoding"] = {{"x", step_axis()},
                          {"y", {{"field", "loss"}, {"type", "quantitative"}, {"scale", {{"zero", false}}}}},
                          {"color", {{"field", "optimizer"}, {"type", "nominal"}}},
                          {"strokeDash", {{"field", "optimizer"}, {"type", "nominal"}}},
                          {"tooltip", json::array({{{"field", "step"}}, {{"field", "optimizer"}},
                                                   {{"field", "loss"}, {"format", ".6g"}}})}};
      page.plot(std::move(spec), "The loss each optimizer's step computed, before its update.");
    }
  }
}

}  // namespace d5::report
