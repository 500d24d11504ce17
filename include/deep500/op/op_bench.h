#pragma once
// Level 0 benchmarking of suite problems: one problem on one backend -> one result case, timed by
// the adaptive runner and, on request, checked against the reference backend (forward outputs,
// or input gradients for identical upstream gradients). `d5 ops bench` is a loop over this.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "deep500/metrics/results.h"
#include "deep500/op/suites.h"
#include "deep500/op/validation.h"

namespace d5 {

enum class BenchMode {
  Perf,   // forward time
  Check,  // forward compared with the reference, then timed
  Grad,   // forward and backward compared with the reference; backward timed
};
const char* to_string(BenchMode m);
BenchMode parse_bench_mode(const std::string& s);  // InvalidArgument otherwise

struct OpBenchOptions {
  BenchMode mode = BenchMode::Perf;
  double min_time = 0.2;   // seconds of measured runs at least (and never fewer than 6 runs)
  double max_time = 5;     // measured-phase budget once the CI target is not met
  double target_ci_ratio = 0.02;
  int64_t max_memory = 0;  // bytes of tensors a case may need; 0 = no limit
  double peak_gflops = 0;  // the machine's measured peak, for the peak_fraction metric; 0 = none
  // Operators on a device with caches of its own (a GPU's L2) run each timed call after a flush,
  // as a layer in a network finds its operands; false keeps them warm (d5 ops bench --no-flush).
  bool flush_device_caches = true;
};

// Multiplier from a problem's input+output bytes to what a case holds at once: the reference's
// outputs in check mode, and upstream and input gradients on both sides in grad mode.
int memory_factor(BenchMode m);

// Comparison tolerance |actual - expected| <= atol + rtol |expected| for outputs of `op_type`
// that are sums of `reduction` products of inputs in [-1, 1]: default_tolerance()'s rtol, and an
// atol that grows with the reduction length (see docs/ops-bench.md for the derivation).
Tolerance check_tolerance(DType t, const std::string& op_type, int64_t reduction);

// What every backend of one problem shares: its inputs, and the reference's results, each made
// once on first use.
class ProblemContext {
 public:
  explicit ProblemContext(Problem p) : problem_(std::move(p)) {}
  const Problem& problem() const { return problem_; }
  const std::vector<Tensor>& inputs();
  const std::vector<Tensor>& upstream_gradients(const std::vector<TensorDesc>& outputs);
  // The reference's outputs (and, with_grad, gradients for upstream_gradients()); nullptr when
  // the reference cannot run the problem, with the reason in *why.
  const std::vector<Tensor>* reference_outputs(std::string* why);
  const std::vector<Tensor>* reference_gradients(std::string* why);

 private:
  bool run_reference(bool with_grad, std::string* why);
  Problem problem_;
  std::optional<std::vector<Tensor>> inputs_, upstream_, ref_out_, ref_grad_;
  std::string ref_error_;
};

CaseResult bench_problem(ProblemContext& ctx, const std::string& backend, const OpBenchOptions& options);

}  // namespace d5
