#include "deep500/net/microbatch.h"

#include <algorithm>
#include <limits>

#include <fmt/format.h>

#include "deep500/core/error.h"
#include "deep500/net/implementation_pins.h"
#include "deep500/metrics/runner.h"
#include "deep500/metrics/standard_metrics.h"
#include "deep500/metrics/statistics.h"

namespace d5 {

namespace {

std::vector<int64_t> candidate_sizes(int64_t batch, const std::string& policy) {
  std::vector<int64_t> out;
  if (policy == "all") {
    for (int64_t b = 1; b <= batch; ++b) out.push_back(b);
  } else if (policy == "powers-of-two") {
    for (int64_t b = 1; b < batch; b *= 2) out.push_back(b);
    out.push_back(batch);
  } else {
    throw InvalidArgument(fmt::format("micro-batching policy '{}' is unknown; use powers-of-two or all", policy));
  }
  return out;
}

// Times the convolution of `spec` at micro-batch b under the limit; nullopt when no algorithm
// fits (the reasons go to *why).
std::optional<ConvTiming> time_conv(const OpSpec& full, int64_t b, const MicrobatchOptions& o, std::string* why) {
  OpSpec spec = full;
  std::vector<int64_t> dims = spec.inputs[0].shape.dims();
  dims[0] = b;
  spec.inputs[0].shape = Shape(dims);
  if (!spec.input_values.empty()) spec.input_values[0].reset();
  spec.workspace_limit = o.workspace_limit;
  std::unique_ptr<Operator> op;
  try {
    op = create_operator(spec, {o.backend}, o.pins).op;
  } catch (const Unimplemented& e) {
    *why = e.what();
    return std::nullopt;
  }
  std::vector<Tensor> in;
  for (size_t i = 0; i < spec.inputs.size(); ++i) {
    if (!spec.has_input(i)) {
      in.emplace_back();
      continue;
    }
    Tensor t = Tensor::uninitialized(spec.inputs[i]);
    // The values do not change the time of a convolution; 0.5 avoids denormals and zero fast paths.
    t.fill(0.5);
    in.push_back(std::move(t));
  }
  std::vector<Tensor> out;
  for (const auto& d : op->output_descs()) out.push_back(Tensor::uninitialized(d));
  MetricSet metrics;
  metrics.add(std::make_unique<WallTime>());
  RunSettings settings;
  settings.warmup_runs = 1;
  settings.min_runs = o.min_runs;
  settings.max_seconds = o.seconds_per_size;
  run_measured([&] { op->forward(in, out); }, metrics, settings);
  const Summary s = summarize(metrics[0].samples());
  ConvTiming t;
  t.batch = b;
  t.median_s = s.median;
  t.ci_low_s = s.median_ci.available ? s.median_ci.lower : std::numeric_limits<double>::quiet_NaN();
  t.ci_high_s = s.median_ci.available ? s.median_ci.upper : std::numeric_limits<double>::quiet_NaN();
  t.workspace_bytes = op->workspace_bytes();
  t.implementation = op->implementation();
  return t;
}

ConvMicrobatchPlan plan_conv(const Network& net, const Node& node, const MicrobatchOptions& o) {
  const OpSpec& spec = net.spec(node.name);
  ConvMicrobatchPlan plan;
  plan.node = node.name;
  plan.batch = spec.inputs[0].shape.dims().at(0);
  std::string why;
  for (int64_t b : candidate_sizes(plan.batch, o.policy)) {
    std::string reason;
    if (auto t = time_conv(spec, b, o, &reason)) plan.candidates.push_back(*t);
    else if (why.empty()) why = fmt::format("at micro-batch {}: {}", b, reason);
  }
  std::vector<std::pair<int64_t, double>> times;
  for (const auto& c : plan.candidates) times.emplace_back(c.batch, c.median_s);
  plan.micro_batches = optimal_partition(plan.batch, times);
  // Without pins one image always fits some algorithm unless the limit is below its need; a
  // pinned algorithm may also refuse sizes (the batched one refuses single images), so the batch
  // must be a sum of the sizes it accepts.
  D5_CHECK_ARG(!plan.micro_batches.empty(),
               "Conv '{}': no partition of the batch of {} into micro-batches that {} under a workspace limit of "
               "{} bytes ({})",
               node.name, plan.batch, o.pins.count("Conv") ? "the pinned implementation accepts" : "fit any algorithm",
               o.workspace_limit, why.empty() ? "no candidate size accepted" : why);
  plan.time_after_s = 0;
  for (int64_t b : plan.micro_batches)
    for (const auto& c : plan.candidates)
      if (c.batch == b) plan.time_after_s += c.median_s;
  const double inf = std::numeric_limits<double>::infinity();
  const auto whole = std::find_if(plan.candidates.begin(), plan.candidates.end(),
                                  [&](const ConvTiming& c) { return c.batch == plan.batch; });
  plan.time_before_s = whole != plan.candidates.end() ? whole->median_s : inf;
  plan.workspace_before = whole != plan.candidates.end() ? whole->workspace_bytes : -1;
  for (int64_t b : plan.micro_batches)
    for (const auto& c : plan.candidates)
      if (c.batch == b) plan.workspace_after = std::max(plan.workspace_after, c.workspace_bytes);
  return plan;
}

}  // namespace

std::vector<int64_t> optimal_partition(int64_t batch, const std::vector<std::pair<int64_t, double>>& times) {
  D5_CHECK_ARG(batch >= 1, "micro-batching a batch of {}", batch);
  // best[n]: least time for n images; pick[n]: the size that starts an optimal partition of n.
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> best(static_cast<size_t>(batch + 1), inf);
  std::vector<int64_t> pick(static_cast<size_t>(batch + 1), 0);
  best[0] = 0;
  for (int64_t n = 1; n <= batch; ++n)
    for (const auto& [b, t] : times) {
      if (b < 1 || b > n || best[static_cast<size_t>(n - b)] == inf) continue;
      const double total = t + best[static_cast<size_t>(n - b)];
      if (total < best[static_cast<size_t>(n)]) {
        best[static_cast<size_t>(n)] = total;
        pick[static_cast<size_t>(n)] = b;
      }
    }
  std::vector<int64_t> out;
  if (best[static_cast<size_t>(batch)] == inf) return out;
  for (int64_t n = batch; n > 0; n -= pick[static_cast<size_t>(n)]) out.push_back(pick[static_cast<size_t>(n)]);
  std::sort(out.rbegin(), out.rend());
  return out;
}

MicrobatchPlan plan_microbatches(const Network& net, const MicrobatchOptions& o) {
  D5_CHECK_ARG(o.workspace_limit >= 0, "micro-batching needs a workspace limit in bytes (got {})",
               o.workspace_limit);
  D5_CHECK_ARG(o.min_runs >= 1 && o.seconds_per_size > 0, "micro-batching needs min_runs >= 1 and a positive "
               "measurement time");
  net.infer();
  MicrobatchPlan plan;
  plan.workspace_limit = o.workspace_limit;
  for (const Node* n : net.topological_order())
    if (n->op_type == "Conv" && !net.is_folded(n->name)) plan.convs.push_back(plan_conv(net, *n, o));
  return plan;
}

int apply_microbatches(Network& net, const MicrobatchPlan& plan) {
  int changed = 0;
  for (const auto& p : plan.convs) {
    if (!p.changed()) continue;
    const Node conv = net.node(p.node);
    D5_CHECK_ARG(conv.op_type == "Conv" && !conv.inputs.empty() && conv.outputs.size() == 1,
                 "micro-batch plan names '{}', which is not a single-output Conv of this network", p.node);
    const std::string x = conv.inputs[0], y = conv.outputs[0];
    Node split{net.unique_name(p.node + "_microbatch_split"), "Split", "", {}, {x}, {}};
    split.attrs.set("axis", int64_t{0});
    // Split's sizes moved from an attribute to an input in opset 13.
    if (net.opset() >= 13) {
      const std::string sizes = net.unique_name(p.node + "_microbatch_sizes");
      Tensor t(DType::i64, Shape{static_cast<int64_t>(p.micro_batches.size())});
      for (size_t i = 0; i < p.micro_batches.size(); ++i) t.set(static_cast<int64_t>(i), static_cast<double>(p.micro_batches[i]));
      net.feed_tensor(sizes, t);
      split.inputs.push_back(sizes);
    } else {
      split.attrs.set("split", p.micro_batches);
    }
    Node concat{net.unique_name(p.node + "_microbatch_concat"), "Concat", "", {}, {}, {}};
    concat.attrs.set("axis", int64_t{0});
    std::vector<Node> parts;
    for (size_t i = 0; i < p.micro_batches.size(); ++i) {
      const std::string xi = net.unique_name(fmt::format("{}_mb{}", x, i));
      const std::string yi = net.unique_name(fmt::format("{}_mb{}", y, i));
      split.outputs.push_back(xi);
      concat.inputs.push_back(yi);
      Node part = conv;
      part.name = net.unique_name(fmt::format("{}_mb{}", p.node, i));
      part.inputs[0] = xi;
      part.outputs = {yi};
      parts.push_back(std::move(part));
    }
    concat.outputs = {y};
    net.remove_node(p.node);
    net.add_node(std::move(split));
    for (auto& part : parts) net.add_node(std::move(part));
    net.add_node(std::move(concat));
    ++changed;
  }
  return changed;
}

}  // namespace d5
