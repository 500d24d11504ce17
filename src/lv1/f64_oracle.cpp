#include "deep500/net/f64_oracle.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "deep500/core/error.h"
#include "deep500/net/operator_executor.h"

namespace d5 {

namespace {

// ONNX TensorProto data types (Cast's 'to'): FLOAT and DOUBLE. Spelled here rather than taken
// from the ONNX reader, which a build may leave out.
constexpr int64_t kOnnxFloat = 1;
constexpr int64_t kOnnxDouble = 11;

Tensor widened(const Tensor& t) { return t.defined() && t.dtype() == DType::f32 ? t.cast(DType::f64) : t; }

Node widened(const Node& n) {
  Node w = n;
  for (const auto& [name, value] : n.attrs.all()) {
    if (const auto* t = std::get_if<Tensor>(&value)) {
      w.attrs.set(name, widened(*t));
    } else if (name == "to" && n.op_type == "Cast" && std::holds_alternative<int64_t>(value)) {
      if (std::get<int64_t>(value) == kOnnxFloat) w.attrs.set(name, kOnnxDouble);
    } else if (name == "dtype" || name == "to") {
      throw Unimplemented(fmt::format("no f64 twin of node '{}' ({}): its attribute '{}' names a type", n.name,
                                      n.op_type, name));
    }
  }
  return w;
}

double l2_norm(const Tensor& t) {
  double sum = 0;
  for (int64_t i = 0; i < t.numel(); ++i) {
    const double v = t.get(i);
    if (std::isfinite(v)) sum += v * v;
  }
  return std::sqrt(sum);
}

}  // namespace

Network f64_twin(const Network& network) {
  network.infer();
  Network twin(network.name(), network.opset());
  for (const auto& in : network.inputs()) {
    TensorDesc d = network.desc(in);
    if (d.dtype == DType::f32) d.dtype = DType::f64;
    twin.add_input(in, d);
  }
  for (const auto& name : network.initializers())
    twin.feed_tensor(name, widened(network.fetch_tensor(name).to(Device::cpu())), network.is_param(name));
  for (const auto& n : network.nodes()) twin.add_node(widened(n));
  for (const auto& out : network.outputs()) twin.add_output(out);
  return twin;
}

TensorMap f64_feeds(const TensorMap& feeds) {
  TensorMap out;
  for (const auto& [name, t] : feeds) out[name] = widened(t.to(Device::cpu()));
  return out;
}

F64Judgement judge_against_f64(const Network& network, const TensorMap& feeds, const std::string& loss,
                               std::span<const ComparedTensor* const> tensors) {
  Network twin = f64_twin(network);
  ReferenceExecutor exact(twin);
  const TensorMap outputs =
      loss.empty() ? exact.inference(f64_feeds(feeds)) : exact.inference_and_backprop(f64_feeds(feeds), loss);
  F64Judgement j;
  double worst_ratio = 0, worst_reference_error = 0;
  std::string worst, reference_worst;
  for (const ComparedTensor* c : tensors) {
    auto it = outputs.find(c->name);
    const Tensor r64 = it != outputs.end() ? it->second : twin.fetch_tensor(c->name);
    const double norm = l2_norm(r64);
    const double scale = norm > 0 ? norm : 1;  // relative to the exact values; absolute when they are 0
    const double error = compare_output(c->actual, r64, c->tol, 0).l2 / scale;
    const double reference_error = compare_output(c->reference, r64, c->tol, 0).l2 / scale;
    const double allowed = kF64ErrorRatio * reference_error + kF64RelativeFloor;
    j.tensors.push_back(
        {{"name", c->name}, {"error", error}, {"reference_error", reference_error}, {"allowed", allowed}});
    if (reference_error >= worst_reference_error) {
      worst_reference_error = reference_error;
      reference_worst = c->name;
    }
    const double ratio = reference_error > 0 ? error / reference_error : (error > 0 ? INFINITY : 0);
    if (ratio >= worst_ratio) {
      worst_ratio = ratio;
      worst = c->name;
    }
    if (error <= allowed) continue;
    if (j.failed.empty())
      j.detail = fmt::format("{} is {:.3g} (relative l2) from the reference's f64 run, more than {} times the f32 "
                             "reference's own {:.3g}",
                             c->label, error, kF64ErrorRatio, reference_error);
    j.failed.push_back(c->name);
  }
  j.state = j.failed.empty() ? CaseState::Passed : CaseState::Failed;
  if (j.state == CaseState::Passed)
    j.detail = fmt::format(
        "{} tensor(s) outside the element-wise tolerance judged against the reference's f64 run instead, since "
        "f32 rounding alone moves them that far (the f32 reference is {:.3g} off in '{}'): this executor is at "
        "most {:.2g} times as far off as the f32 reference (limit {}, in '{}')",
        tensors.size(), worst_reference_error, reference_worst, worst_ratio, kF64ErrorRatio, worst);
  return j;
}

}  // namespace d5
