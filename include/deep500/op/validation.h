#pragma once
// Level 0 validation: is an operator's forward right (against reference outputs), and is its
// backward the derivative of its forward (against central finite differences)?
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "deep500/metrics/metric.h"
#include "deep500/op/operator.h"
#include "deep500/metrics/results.h"

namespace d5 {

// ---- Forward checking --------------------------------------------------------------------

// Tolerance of an element-wise comparison: |actual - reference| <= atol + rtol * |reference|.
struct Tolerance {
  double rtol = 0, atol = 0;
};

// The default tolerance for an output of `dtype` produced by op `op_type` (benchdnn style):
// f32 rtol 1e-4 / atol 1e-6, f64 1e-10 / 1e-12, f16 2e-3 / 1e-5, bf16 1.6e-2 / 1e-5; integers
// and bool exact. The type's numeric class (op_traits.h) scales it: transcendental types (Exp,
// Log, Tanh, Sigmoid, Pow, Erf, Gelu, ...) get 5x rtol and 10x atol: optimized backends evaluate
// them with vectorized approximations of a few ulp, and near zeros of the function (Log near 1,
// Tanh near 0) only an absolute bound is meaningful. Accumulating types (MatMul, Gemm, Conv,
// reductions, normalizations, pooling averages, RNNs, CumSum, Einsum) get 10x both: their rounding
// error grows with the reduction length and depends on the summation order. Types without traits
// get the base tolerance. The table is documented in docs/validation.md.
Tolerance default_tolerance(DType dtype, const std::string& op_type);

// Element-wise comparison of one output with its reference, in double.
struct OutputComparison {
  Tolerance tol;
  double l1 = 0, l2 = 0, linf = 0;  // norms of (actual - reference) over elements both finite
  double rel_l2 = 0;                // l2 / ||reference||_2 (l2 itself when the reference is 0)
  double max_abs_error = 0;
  // |a - r| / |r|, or |a - r| where |r| is below the smallest normal float (benchdnn's rule,
  // so that a reference zero does not make every error infinite).
  double max_rel_error = 0;
  int64_t mismatches = 0;           // elements outside the tolerance
  int64_t nonfinite_mismatches = 0; // NaN against a number, or infinities that differ
  // The element furthest outside its tolerance (or, when all pass, closest to failing).
  int64_t worst_index = -1;
  double worst_actual = 0, worst_reference = 0;
  double zero_fraction = 0;         // exact zeros in the reference
  bool reference_all_nonfinite = false;
  // Max of |a - r| over blocks of the output viewed as [prod(leading dims), last dim], reduced
  // to at most heatmap_size x heatmap_size (rows x cols, row-major). A non-finite mismatch is
  // +inf (null in JSON).
  int64_t heatmap_rows = 0, heatmap_cols = 0;
  std::vector<double> heatmap;
};
// NaN matches NaN and equal infinities match. Shapes must match (InvalidArgument otherwise);
// dtypes may differ. heatmap_size 0 skips the heatmap.
OutputComparison compare_output(const Tensor& actual, const Tensor& reference, Tolerance tol,
                                int heatmap_size = 32);
// "element [1, 2] (flat 6): got 0.5, expected 0.7, |diff| 0.2 > 1.07e-06 (atol 1e-06 + rtol 1e-04 * |ref|)"
std::string describe_worst(const OutputComparison& c, const Shape& shape);

// The maps are reduced to at most heatmap_size x heatmap_size blocks by their maximum.
struct ForwardCheckOptions {
  std::optional<double> rtol, atol;  // override default_tolerance() for every output
  int reruns = 3;                    // forward runs for the repeatability map (>= 1)
  int heatmap_size = 32;
  // MISTRUSTED when a floating-point reference with more than mistrust_min_elements elements has
  // more than this fraction of exact zeros: a check against zeros cannot tell much.
  double mistrust_zero_fraction = 0.99;
  int64_t mistrust_min_elements = 100;
};

struct OutputCheck {
  size_t index = 0;  // which output of the operator
  OutputComparison cmp;
  // Per-element population variance over the reruns, reduced like the heatmap; an element whose
  // runs disagree in non-finite ways counts as +inf.
  std::vector<double> variance_map;
  double max_variance = 0;
  int64_t nondeterministic = 0;  // elements whose value changed between runs
};

struct ForwardCheckResult {
  CaseState state = CaseState::Passed;
  // FAILED: the output, worst element, values and tolerance. MISTRUSTED: which output is
  // degenerate. PASSED: the worst relative l2 error.
  std::string detail;
  // One per compared output: undefined references and shape/dtype mismatches have no entry.
  std::vector<OutputCheck> outputs;
  // For CaseResult::extra: {"outputs": [{"index", "dtype", "shape", "rtol", "atol", "l1", "l2",
  // "linf", "rel_l2", "max_abs_error", "max_rel_error", "mismatches", "worst": {...},
  // "heatmap": {"rows", "cols", "values"}, "repeatability": {...}}]}.
  nlohmann::json extra = nlohmann::json::object();
};

// One tensor and its reference, for checks over several tensors at once.
struct ComparedTensor {
  std::string label;  // names it in messages: "output 0", "gradient 'W@grad'"
  size_t index = 0;   // OutputCheck::index and the JSON "index"
  std::string name;   // the tensor's name, in the JSON when not empty
  Tensor actual, reference;
  Tolerance tol;
};

// The comparison core of test_forward, shared with Level 1's executor checks: compares every
// pair (a shape or dtype mismatch is FAILED) and sums up. FAILED: the tensor whose worst element
// is furthest outside its tolerance. MISTRUSTED: a floating-point reference that is all
// non-finite, or has more than options.mistrust_zero_fraction exact zeros. PASSED: the worst
// relative l2 error. `subject` starts the detail ("Conv 'c1'", "network 'mlp' on onednn");
// `noun` counts what passed ("output(s)"). Uses the heatmap and mistrust options, not reruns.
ForwardCheckResult check_tensors(std::span<const ComparedTensor> tensors, const std::string& subject,
                                 const std::string& noun, const ForwardCheckOptions& options = {});

// Runs op.forward() `reruns` times on `inputs` and compares the first run's outputs with
// `reference_outputs` (fewer references than outputs compare only the leading outputs; an
// undefined reference skips that output). A shape or dtype mismatch is FAILED. State
// precedence: FAILED over MISTRUSTED over PASSED.
ForwardCheckResult test_forward(Operator& op, std::span<const Tensor> inputs,
                                std::span<const Tensor> reference_outputs,
                                const ForwardCheckOptions& options = {});

// ---- Gradient checking -------------------------------------------------------------------

struct GradientCheckOptions {
  double eps = 0;          // finite-difference step; 0 = by dtype (f64: 1e-6, f32: 1e-3)
  double rtol = 0;         // 0 = by dtype (f64: 1e-5, f32: 2e-2)
  double atol = 0;         // 0 = by dtype (f64: 1e-7, f32: 2e-3)
  uint64_t seed = 0x5eed;  // upstream gradients and element sampling
  int64_t max_elements_per_input = 512;  // larger inputs are checked at a seeded random sample
};

struct GradientCheckResult {
  CaseState state = CaseState::Passed;
  std::string detail;           // the worst element, or why the state is not PASSED
  double max_abs_error = 0;
  double max_rel_error = 0;
  int64_t checked = 0;          // elements compared
  int64_t non_smooth = 0;       // elements skipped: two step sizes disagreed (a kink or tie)
};

// Central differences of L = sum_k <g_k, y_k> with random upstream gradients g_k, accumulated in
// double, at steps eps and eps/2 (Richardson-extrapolated), compared with backward(). An element
// whose forward and backward one-sided slopes differ by an amount that does not shrink with the
// step sits on a non-smooth point (ReLU at 0, a pooling tie): it is skipped and counted. If every
// element is skipped the result is MISTRUSTED, as it is when all gradients are (near) zero, since
// such a check cannot fail.
GradientCheckResult test_gradient(Operator& op, std::span<const Tensor> inputs,
                                  const GradientCheckOptions& options = {});

}  // namespace d5
