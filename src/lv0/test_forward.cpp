// Forward validation: norms of the difference to a reference, the worst element, a block-max
// difference heatmap and a repeatability map over reruns.
#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "deep500/core/error.h"
#include "deep500/op/op_traits.h"
#include "deep500/op/validation.h"

namespace d5 {

namespace {

using nlohmann::json;

// The output viewed as [prod(leading dims), last dim] and split into at most size x size
// balanced blocks; block_of(i) is the heatmap cell of flat element i.
struct Blocks {
  int64_t rows = 0, cols = 0, hr = 0, hc = 0;
  Blocks(const Shape& s, int size) {
    cols = s.rank() == 0 ? 1 : s[s.rank() - 1];
    rows = 1;
    for (size_t d = 0; d + 1 < s.rank(); ++d) rows *= s[d];
    if (size > 0) {
      hr = std::min<int64_t>(rows, size);
      hc = std::min<int64_t>(cols, size);
    }
  }
  int64_t cells() const { return hr * hc; }
  int64_t block_of(int64_t i) const { return (i / cols) * hr / rows * hc + (i % cols) * hc / cols; }
};

json matrix(const std::vector<double>& v, int64_t rows, int64_t cols) {
  json m = json::array();
  for (int64_t r = 0; r < rows; ++r)
    m.push_back(std::vector<double>(v.begin() + r * cols, v.begin() + (r + 1) * cols));
  return m;
}

std::string unravel(int64_t flat, const Shape& shape) {
  std::vector<int64_t> idx(shape.rank());
  for (size_t d = shape.rank(); d-- > 0;) {
    idx[d] = flat % shape[d];
    flat /= shape[d];
  }
  return fmt::format("[{}]", fmt::join(idx, ", "));
}

bool same_value(double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); }

// Per-element population variance over the runs of one output, reduced by block max.
void repeatability(const std::vector<std::vector<Tensor>>& runs, size_t k, int heatmap_size, OutputCheck& out) {
  const Tensor& first = runs[0][k];
  const Blocks b(first.shape(), heatmap_size);
  out.variance_map.assign(static_cast<size_t>(b.cells()), 0.0);
  std::vector<double> v(runs.size());
  for (int64_t i = 0; i < first.numel(); ++i) {
    bool same = true, finite = true;
    for (size_t j = 0; j < runs.size(); ++j) {
      v[j] = runs[j][k].get(i);
      same = same && same_value(v[j], v[0]);
      finite = finite && std::isfinite(v[j]);
    }
    if (same) continue;
    ++out.nondeterministic;
    double var = INFINITY;
    if (finite) {
      double mean = 0, m2 = 0;
      for (double x : v) mean += x;
      mean /= static_cast<double>(v.size());
      for (double x : v) m2 += (x - mean) * (x - mean);
      var = m2 / static_cast<double>(v.size());
    }
    out.max_variance = std::max(out.max_variance, var);
    if (b.cells()) {
      double& cell = out.variance_map[static_cast<size_t>(b.block_of(i))];
      cell = std::max(cell, var);
    }
  }
}

json to_json(const OutputCheck& o, const Tensor& ref) {
  const auto& c = o.cmp;
  json j = {{"index", o.index},
            {"dtype", to_string(ref.dtype())},
            {"shape", ref.shape().dims()},
            {"rtol", c.tol.rtol},
            {"atol", c.tol.atol},
            {"l1", c.l1},
            {"l2", c.l2},
            {"linf", c.linf},
            {"rel_l2", c.rel_l2},
            {"max_abs_error", c.max_abs_error},
            {"max_rel_error", c.max_rel_error},
            {"mismatches", c.mismatches},
            {"nonfinite_mismatches", c.nonfinite_mismatches},
            {"zero_fraction", c.zero_fraction},
            {"heatmap", {{"rows", c.heatmap_rows}, {"cols", c.heatmap_cols},
                         {"values", matrix(c.heatmap, c.heatmap_rows, c.heatmap_cols)}}}};
  if (c.worst_index >= 0)
    j["worst"] = {{"flat_index", c.worst_index}, {"index", unravel(c.worst_index, ref.shape())},
                  {"actual", c.worst_actual}, {"reference", c.worst_reference}};
  return j;
}

}  // namespace

Tolerance default_tolerance(DType dtype, const std::string& op_type) {
  Tolerance t;
  switch (dtype) {
    case DType::f32: t = {1e-4, 1e-6}; break;
    case DType::f64: t = {1e-10, 1e-12}; break;
    case DType::f16: t = {2e-3, 1e-5}; break;
    case DType::bf16: t = {1.6e-2, 1e-5}; break;
    default: return {0, 0};  // integers and bool: exact
  }
  // The op type's numeric class (op_traits.h); types nobody described get the base tolerance.
  const auto traits = op_traits(op_type);
  if (!traits) return t;
  switch (traits->numerics) {
    case NumericClass::transcendental: return {t.rtol * 5, t.atol * 10};
    case NumericClass::accumulating: return {t.rtol * 10, t.atol * 10};
    case NumericClass::elementwise: break;
  }
  return t;
}

OutputComparison compare_output(const Tensor& actual, const Tensor& reference, Tolerance tol, int heatmap_size) {
  D5_CHECK_ARG(actual.shape() == reference.shape(), "compare_output: shapes differ: actual {}, reference {}",
               actual.desc().to_string(), reference.desc().to_string());
  OutputComparison c;
  c.tol = tol;
  const Blocks b(reference.shape(), heatmap_size);
  c.heatmap_rows = b.hr;
  c.heatmap_cols = b.hc;
  c.heatmap.assign(static_cast<size_t>(b.cells()), 0.0);

  const int64_t n = reference.numel();
  const double tiny = std::numeric_limits<float>::min();
  double ref_l2 = 0, worst_excess = -INFINITY;
  int64_t zeros = 0, ref_nonfinite = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double a = actual.get(i), r = reference.get(i);
    zeros += r == 0;
    if (std::isfinite(r)) ref_l2 += r * r;
    else ++ref_nonfinite;
    const double allowed = tol.atol + tol.rtol * std::abs(r);
    double diff = 0, excess = -allowed;
    if (same_value(a, r)) {
      if (!std::isfinite(r)) excess = -INFINITY;
    } else if (!std::isfinite(a) || !std::isfinite(r)) {
      ++c.nonfinite_mismatches;
      ++c.mismatches;
      diff = excess = INFINITY;
    } else {
      diff = std::abs(a - r);
      excess = diff - allowed;
      c.l1 += diff;
      c.l2 += diff * diff;
      c.linf = std::max(c.linf, diff);
      c.max_rel_error = std::max(c.max_rel_error, diff / (std::abs(r) > tiny ? std::abs(r) : 1.0));
      c.mismatches += excess > 0;
    }
    c.max_abs_error = std::max(c.max_abs_error, diff);
    if (excess > worst_excess || c.worst_index < 0) {
      worst_excess = excess;
      c.worst_index = i;
      c.worst_actual = a;
      c.worst_reference = r;
    }
    if (b.cells()) {
      double& cell = c.heatmap[static_cast<size_t>(b.block_of(i))];
      cell = std::max(cell, diff);
    }
  }
  c.l2 = std::sqrt(c.l2);
  ref_l2 = std::sqrt(ref_l2);
  c.rel_l2 = ref_l2 > 0 ? c.l2 / ref_l2 : c.l2;
  c.zero_fraction = n ? static_cast<double>(zeros) / static_cast<double>(n) : 0;
  c.reference_all_nonfinite = n > 0 && ref_nonfinite == n;
  return c;
}

std::string describe_worst(const OutputComparison& c, const Shape& shape) {
  if (c.worst_index < 0) return "no elements";
  const double a = c.worst_actual, r = c.worst_reference;
  const double diff = same_value(a, r) ? 0 : std::isfinite(a) && std::isfinite(r) ? std::abs(a - r) : INFINITY;
  const double allowed = c.tol.atol + c.tol.rtol * std::abs(r);
  return fmt::format("element {} (flat {}): got {:.9g}, expected {:.9g}, |diff| {:.3g} {} {:.3g} (atol {:g} + "
                     "rtol {:g} * |expected|)",
                     unravel(c.worst_index, shape), c.worst_index, a, r, diff, diff > allowed ? ">" : "<=",
                     allowed, c.tol.atol, c.tol.rtol);
}

ForwardCheckResult check_tensors(std::span<const ComparedTensor> tensors, const std::string& subject,
                                 const std::string& noun, const ForwardCheckOptions& options) {
  D5_CHECK_ARG(options.heatmap_size >= 1, "{}: heatmap_size must be at least 1, got {}", subject,
               options.heatmap_size);
  ForwardCheckResult res;
  res.extra = {{"outputs", json::array()}};
  std::string failure, mistrust;
  double worst_excess_ratio = -1, worst_rel_l2 = 0;
  for (const auto& t : tensors) {
    const Tensor& ref = t.reference;
    const Tensor& actual = t.actual;
    if (actual.dtype() != ref.dtype() || actual.shape() != ref.shape()) {
      const std::string msg = fmt::format("{} is {} but the reference is {}", t.label, actual.desc().to_string(),
                                          ref.desc().to_string());
      json e = {{"index", t.index}, {"error", msg}};
      if (!t.name.empty()) e["name"] = t.name;
      res.extra["outputs"].push_back(std::move(e));
      if (failure.empty()) failure = msg;
      worst_excess_ratio = INFINITY;
      continue;
    }
    const Tolerance tol = t.tol;
    OutputCheck oc;
    oc.index = t.index;
    oc.cmp = compare_output(actual, ref, tol, options.heatmap_size);
    const auto& c = oc.cmp;
    worst_rel_l2 = std::max(worst_rel_l2, c.rel_l2);
    if (c.mismatches > 0) {
      // Report the tensor whose worst element is furthest outside its tolerance.
      const double allowed = tol.atol + tol.rtol * std::abs(c.worst_reference);
      const double ratio = c.nonfinite_mismatches ? INFINITY
                                                  : std::abs(c.worst_actual - c.worst_reference) /
                                                        std::max(allowed, std::numeric_limits<double>::min());
      if (failure.empty() || ratio > worst_excess_ratio) {
        worst_excess_ratio = ratio;
        failure = fmt::format("{}: {} of {} elements outside tolerance; worst {}", t.label, c.mismatches,
                              ref.numel(), describe_worst(c, ref.shape()));
      }
    } else if (mistrust.empty() && is_floating(ref.dtype())) {
      if (c.reference_all_nonfinite)
        mistrust = fmt::format("{}: every reference element is non-finite", t.label);
      else if (ref.numel() > options.mistrust_min_elements && c.zero_fraction > options.mistrust_zero_fraction)
        mistrust = fmt::format("{}: {:.2f}% of the {} reference elements are exactly zero", t.label,
                               100 * c.zero_fraction, ref.numel());
    }
    json e = to_json(oc, ref);
    if (!t.name.empty()) e["name"] = t.name;
    res.extra["outputs"].push_back(std::move(e));
    res.outputs.push_back(std::move(oc));
  }

  if (!failure.empty()) {
    res.state = CaseState::Failed;
    res.detail = fmt::format("{}: {}", subject, failure);
  } else if (!mistrust.empty()) {
    res.state = CaseState::Mistrusted;
    res.detail = fmt::format("{}: {}; the comparison has little power", subject, mistrust);
  } else {
    res.state = CaseState::Passed;
    res.detail = fmt::format("{}: {} {} within tolerance; worst relative l2 error {:.3g}", subject,
                             res.outputs.size(), noun, worst_rel_l2);
  }
  return res;
}

ForwardCheckResult test_forward(Operator& op, std::span<const Tensor> inputs,
                                std::span<const Tensor> reference_outputs, const ForwardCheckOptions& options) {
  const OpSpec& spec = op.spec();
  D5_CHECK_ARG(reference_outputs.size() <= op.output_descs().size(),
               "test_forward: {} reference outputs given, but {} produces {}", reference_outputs.size(),
               spec.label(), op.output_descs().size());
  D5_CHECK_ARG(options.reruns >= 1, "test_forward: reruns must be at least 1, got {}", options.reruns);
  D5_CHECK_ARG(options.heatmap_size >= 1, "test_forward: heatmap_size must be at least 1, got {}",
               options.heatmap_size);

  // The operator gets its inputs on its device; outputs are compared on the host.
  const std::vector<Tensor> op_inputs = to_device(inputs, op.device());
  std::vector<std::vector<Tensor>> runs;
  for (int r = 0; r < options.reruns; ++r) runs.push_back(to_device(op.run_forward(op_inputs), Device::cpu()));

  std::vector<ComparedTensor> compared;
  for (size_t k = 0; k < reference_outputs.size(); ++k) {
    const Tensor& ref = reference_outputs[k];
    if (!ref.defined()) continue;
    Tolerance tol = default_tolerance(ref.dtype(), spec.type);
    if (options.rtol) tol.rtol = *options.rtol;
    if (options.atol) tol.atol = *options.atol;
    compared.push_back({fmt::format("output {}", k), k, "", runs[0][k], ref, tol});
  }
  ForwardCheckResult res = check_tensors(compared, spec.label(), "output(s)", options);
  res.extra["op"] = spec.type;
  res.extra["reruns"] = options.reruns;
  if (options.reruns > 1) {
    // The repeatability map of each compared output, next to its comparison.
    size_t next = 0;
    for (auto& entry : res.extra["outputs"]) {
      if (entry.contains("error")) continue;
      OutputCheck& oc = res.outputs[next++];
      repeatability(runs, oc.index, options.heatmap_size, oc);
      const auto& c = oc.cmp;
      entry["repeatability"] = {{"max_variance", oc.max_variance}, {"nondeterministic", oc.nondeterministic},
                                {"rows", c.heatmap_rows}, {"cols", c.heatmap_cols},
                                {"values", matrix(oc.variance_map, c.heatmap_rows, c.heatmap_cols)}};
    }
  }
  return res;
}

}  // namespace d5
