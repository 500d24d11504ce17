// One suite problem on one backend. Every way a case can end is a state with a reason: a backend
// that is not built is SKIPPED, one that refuses is UNIMPLEMENTED with its refusal, a wrong result
// is FAILED with the worst element. Only correct results are timed in check and grad modes: the
// speed of a wrong answer is not worth reporting.
#include "deep500/op/op_bench.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <new>

#include <fmt/format.h>

#include "deep500/core/backend.h"
#include "deep500/core/error.h"
#include "deep500/op/op_registry.h"
#include "deep500/metrics/reporter.h"
#include "deep500/metrics/runner.h"
#include "deep500/metrics/device_metrics.h"
#include "deep500/metrics/standard_metrics.h"
#include "deep500/core/threads.h"
#include "deep500/core/build_info.h"
#include "deep500/core/device_allocator.h"
#include "deep500/metrics/device_peak.h"
#include "deep500/metrics/device_run.h"
#include "deep500/metrics/timer.h"

namespace d5 {

const char* to_string(BenchMode m) {
  switch (m) {
    case BenchMode::Perf: return "perf";
    case BenchMode::Check: return "check";
    case BenchMode::Grad: return "grad";
  }
  return "?";
}

BenchMode parse_bench_mode(const std::string& s) {
  for (auto m : {BenchMode::Perf, BenchMode::Check, BenchMode::Grad})
    if (s == to_string(m)) return m;
  D5_THROW(InvalidArgument, "unknown mode '{}': use perf, check or grad", s);
}

int memory_factor(BenchMode m) {
  switch (m) {
    case BenchMode::Perf: return 1;
    case BenchMode::Check: return 2;
    case BenchMode::Grad: return 4;
  }
  return 1;
}

Tolerance check_tolerance(DType t, const std::string& op_type, int64_t reduction) {
  // u is the unit roundoff. A sum of R products of values in [-1, 1] carries a rounding error
  // of about R*u/3 with random rounding (Higham, "Accuracy and Stability of Numerical
  // Algorithms", 2002, ch. 4); blocked and pairwise sums do better. atol = 4 R u leaves a
  // factor ~10 over that, while a wrong result is off by the size of the sum itself, ~sqrt(R)/3.
  // default_tolerance()'s rtol bounds the error in the large elements.
  Tolerance tol = default_tolerance(t, op_type);
  const double u = t == DType::f64 ? 0x1p-53 : 0x1p-24;
  tol.atol = std::max(tol.atol, 4 * u * static_cast<double>(std::max<int64_t>(reduction, 1)));
  return tol;
}

const std::vector<Tensor>& ProblemContext::inputs() {
  if (!inputs_) inputs_ = generate_inputs(problem_);
  return *inputs_;
}

const std::vector<Tensor>& ProblemContext::upstream_gradients(const std::vector<TensorDesc>& outputs) {
  if (!upstream_) {
    upstream_.emplace();
    for (size_t k = 0; k < outputs.size(); ++k)
      upstream_->push_back(is_floating(outputs[k].dtype) ? generate_upstream_gradient(problem_, k, outputs[k]) : Tensor());
  }
  return *upstream_;
}

bool ProblemContext::run_reference(bool with_grad, std::string* why) {
  if (!ref_error_.empty()) {
    *why = ref_error_;
    return false;
  }
  try {
    if (ref_out_ && (!with_grad || ref_grad_)) return true;
    auto op = OpRegistry::global().create(problem_.spec, "reference");
    // Recomputed with the gradient: backward needs the state of its own forward.
    ref_out_ = op->run_forward(inputs());
    if (with_grad) {
      if (!op->has_gradient()) {
        *why = "the reference has no gradient: " + op->no_gradient_reason();
        return false;
      }
      ref_grad_ = op->run_backward(upstream_gradients(op->output_descs()), inputs(), *ref_out_);
    }
    return true;
  } catch (const Error& e) {
    ref_error_ = e.what();
    *why = ref_error_;
    return false;
  }
}

const std::vector<Tensor>* ProblemContext::reference_outputs(std::string* why) {
  return run_reference(false, why) ? &*ref_out_ : nullptr;
}

const std::vector<Tensor>* ProblemContext::reference_gradients(std::string* why) {
  return run_reference(true, why) ? &*ref_grad_ : nullptr;
}

namespace {

// Empty when every gradient of a differentiable input matches, else the first mismatch.
std::string compare_gradients(const std::vector<Tensor>& actual, const std::vector<Tensor>& expected,
                              const std::vector<bool>& mask, const std::string& op_type, int64_t reduction) {
  if (actual.size() != expected.size())
    return fmt::format("{} input gradients but the reference has {}", actual.size(), expected.size());
  for (size_t k = 0; k < actual.size(); ++k) {
    if (k >= mask.size() || !mask[k] || !actual[k].defined() || !expected[k].defined()) continue;
    if (actual[k].dtype() != expected[k].dtype() || actual[k].shape() != expected[k].shape())
      return fmt::format("gradient of input {} is {} but the reference's is {}", k, actual[k].desc().to_string(),
                         expected[k].desc().to_string());
    const auto c = compare_output(actual[k], expected[k], check_tolerance(expected[k].dtype(), op_type, reduction), 0);
    if (c.mismatches > 0)
      return fmt::format("gradient of input {}: {} of {} elements outside tolerance; worst {}", k, c.mismatches,
                         actual[k].numel(), describe_worst(c, actual[k].shape()));
  }
  return {};
}

// Rates derived run by run from the wall-time samples, so their summaries carry CIs: the map
// t -> work / t is monotone, so the CI of the rate is the CI of the time, mapped.
MetricRecord rate_record(const std::string& name, const std::string& unit, const std::vector<double>& seconds,
                         double work) {
  MetricRecord r;
  r.name = name;
  r.unit = unit;
  for (double t : seconds) r.samples.push_back(t > 0 ? work / t : std::numeric_limits<double>::infinity());
  if (!r.samples.empty()) r.summary = summarize(r.samples);
  r.info = {{"derived_from", "wall_time"}, {"work_per_run", work}};
  return r;
}

int threads_of(const std::string& backend) {
  const auto b = find_backend(backend);
  if (b && b->get_threads) return std::max(1, b->get_threads());
  return std::max(1, thread_settings().omp_max_threads);
}

std::vector<std::string> built_backends() {
  std::vector<std::string> names;
  for (const auto& b : backends()) names.push_back(b.name);
  return names;
}

// Why a case is skipped before it starts (a backend this build left out or that cannot run here,
// over the memory budget), or "". A name deep500 has no backend of (a typo) is a usage error,
// never a skip: a misspelt comparison must not end as a quiet SKIPPED.
std::string skip_reason(const std::string& backend, int64_t need, const OpBenchOptions& o) {
  const auto info = find_backend(backend);
  if (!info) {
    D5_CHECK_ARG(is_not_built_backend(backend), "no backend '{}' (built: {}; left out of this build: {})", backend,
                 fmt::join(built_backends(), ", "), not_built_list());
    return fmt::format("this d5 was built without the {} backend; install its dependency and reconfigure "
                       "(docs/building.md)",
                       backend);
  }
  if (!info->available) return fmt::format("backend '{}' is unavailable: {}", backend, info->unavailable_reason);
  if (o.max_memory > 0 && need > o.max_memory)
    return fmt::format("needs {} of tensors in {} mode, over the {} memory budget (--max-memory)",
                       format_bytes(static_cast<double>(need)), to_string(o.mode),
                       format_bytes(static_cast<double>(o.max_memory)));
  return "";
}

// test_forward reruns forward, so the check also catches results that change between runs.
ForwardCheckResult check_forward(Operator& op, const Problem& p, const std::vector<Tensor>& inputs,
                                 const std::vector<Tensor>& reference) {
  ForwardCheckOptions fo;
  const Tolerance tol = check_tolerance(p.spec.inputs.front().dtype, p.spec.type, p.forward_reduction);
  fo.rtol = tol.rtol;
  fo.atol = tol.atol;
  fo.reruns = 2;
  fo.heatmap_size = 8;
  return test_forward(op, inputs, reference, fo);
}

// One timed run sizes the measured phase: at least min_time, and at least 6 runs (the fewest
// with a 95% CI of the median).
RunSettings sized_runs(const std::function<void()>& workload, const OpBenchOptions& o) {
  const int64_t t0 = wall_now_ns();
  workload();
  const double estimate = std::max(1e-9, static_cast<double>(wall_now_ns() - t0) * 1e-9);
  RunSettings s;
  s.warmup_runs = 1;
  s.min_runs = static_cast<int>(std::clamp(std::ceil(o.min_time / estimate), 6.0, 1e6));
  s.max_runs = std::max(s.min_runs, 1000000);
  s.max_seconds = std::max(o.max_time, o.min_time);
  s.target_ci_ratio = o.target_ci_ratio;
  return s;
}

// GFLOP/s, the fraction of the peak, GB/s: each from the first metric's samples (the device's
// time where it has a clock, else wall time), run by run.
void add_rates(std::vector<MetricRecord>& metrics, const std::vector<double>& seconds, double flops, double bytes,
               double peak_gflops) {
  if (flops > 0) {
    metrics.push_back(rate_record("gflops", "GFLOP/s", seconds, flops * 1e-9));
    if (peak_gflops > 0) {
      auto r = rate_record("peak_fraction", "fraction", seconds, flops * 1e-9 / peak_gflops);
      r.info["peak_gflops"] = peak_gflops;
      metrics.push_back(std::move(r));
    }
  }
  if (bytes > 0) metrics.push_back(rate_record("gbps", "GB/s", seconds, bytes * 1e-9));
}

}  // namespace

CaseResult bench_problem(ProblemContext& ctx, const std::string& backend, const OpBenchOptions& o) {
  const Problem& p = ctx.problem();
  CaseResult c;
  c.name = p.name;
  c.level = "L0";
  c.backend = backend;
  c.params = p.params;
  std::vector<std::string> descs;
  for (const auto& d : p.spec.inputs) descs.push_back(d.to_string());
  const int64_t need = p.tensor_bytes * memory_factor(o.mode);
  c.extra = {{"suite", p.suite},       {"op", p.spec.type},   {"attributes", p.spec.attrs.to_string()},
             {"inputs", descs},         {"mode", to_string(o.mode)}, {"tensor_bytes", need},
             {"seed", p.seed},          {"stream", p.stream}};
  auto finish = [&](CaseState s, std::string detail) {
    c.state = s;
    c.detail = std::move(detail);
    return c;
  };

  if (std::string why = skip_reason(backend, need, o); !why.empty()) return finish(CaseState::Skipped, why);

  try {
    std::unique_ptr<Operator> op;
    try {
      op = OpRegistry::global().create(p.spec, backend);
    } catch (const Unimplemented& e) {
      return finish(CaseState::Unimplemented, e.what());
    }
    c.extra["implementation"] = op->implementation();
    // An operator of another device (a GPU) gets its tensors there once, before anything is
    // timed, and each run is timed there (DeviceRun).
    const Device dev = op->device();
    const std::vector<Tensor> inputs = to_device(ctx.inputs(), dev);
    std::vector<Tensor> outputs;
    for (const auto& d : op->output_descs()) outputs.push_back(Tensor::uninitialized(d, dev));
    op->forward(inputs, outputs);
    DeviceRun on_device(dev, o.flush_device_caches);
    if (dev.kind != DeviceKind::cpu) {
      c.extra["device"] = dev.to_string();
      c.extra["timing"] = on_device.describe();
    }

    std::string why;
    if (o.mode != BenchMode::Perf) {
      const auto* ref = ctx.reference_outputs(&why);
      if (!ref) return finish(CaseState::Unimplemented, "cannot check without the reference: " + why);
      const ForwardCheckResult r = check_forward(*op, p, ctx.inputs(), *ref);
      c.extra["check"] = r.extra;
      if (r.state != CaseState::Passed) return finish(r.state, r.detail);
    }

    std::vector<Tensor> gy, grads;
    std::function<void()> workload = [&] { on_device([&] { op->forward(inputs, outputs); }); };
    double flops = op->flops(), bytes = op->bytes();
    if (o.mode == BenchMode::Grad) {
      if (!op->has_gradient()) return finish(CaseState::Unimplemented, "no gradient: " + op->no_gradient_reason());
      gy = to_device(ctx.upstream_gradients(op->output_descs()), dev);
      grads = op->run_backward(gy, inputs, outputs);
      const auto* ref_grads = ctx.reference_gradients(&why);
      if (!ref_grads) return finish(CaseState::Unimplemented, "cannot check gradients without the reference: " + why);
      if (auto bad = compare_gradients(to_device(grads, Device::cpu()), *ref_grads, op->differentiable_inputs(),
                                       p.spec.type, p.backward_reduction);
          !bad.empty())
        return finish(CaseState::Failed, bad);
      workload = [&] { on_device([&] { op->backward(gy, inputs, outputs, grads); }); };
      flops = op->backward_flops();
      bytes = 0;  // read: inputs, outputs' gradients; written: inputs' gradients
      for (const auto& t : inputs) bytes += static_cast<double>(t.bytes());
      for (const auto& t : gy) bytes += t.defined() ? static_cast<double>(t.bytes()) : 0;
      for (const auto& t : grads) bytes += t.defined() ? static_cast<double>(t.bytes()) : 0;
    }
    c.extra["measured"] = o.mode == BenchMode::Grad ? "backward" : "forward";
    c.extra["flops"] = flops;
    c.extra["bytes"] = bytes;

    MetricSet metrics;
    // The first metric drives the stopping rule and the rates: the device's clock where it has one.
    if (on_device.timed()) metrics.add(std::make_unique<DeviceTime>(&on_device.seconds, on_device.describe()));
    metrics.add(std::make_unique<WallTime>());
    metrics.add(std::make_unique<CpuTime>());
    metrics.add(std::make_unique<Utilization>(threads_of(backend)));
    DeviceClock* clock = nullptr;
    if (dev.kind != DeviceKind::cpu) {
      metrics.add(std::make_unique<DevicePeakMemory>(dev));
      metrics.add(std::make_unique<DeviceUtilization>(dev));
      metrics.add(std::make_unique<DeviceEnergy>(dev));
      auto owned = std::make_unique<DeviceClock>(dev);
      clock = owned.get();
      metrics.add(std::move(owned));
    }
    c.outcome = run_measured(workload, metrics, sized_runs(workload, o));
    c.metrics = metrics.results();
    // Runs the device slowed down for power or heat are marked on the case, not only in a record.
    std::string marks;
    if (clock && clock->throttled_readings() > 0) {
      marks = "device " + clock->throttle_note();
      c.extra["throttled"] = clock->throttle_note();
    }
    // An operator on another device is a fraction of that device's measured peak (measured on
    // the first such case), never of the host's.
    double peak = o.peak_gflops;
    if (dev.kind != DeviceKind::cpu)
      peak = has_device_peak_measurer(dev.kind) ? device_peak(dev).gflops_for(p.spec.inputs.front().dtype) : 0;
    add_rates(c.metrics, metrics[0].samples(), flops, bytes, peak);
    return finish(CaseState::Passed, marks);
  } catch (const Unimplemented& e) {
    return finish(CaseState::Unimplemented, e.what());
  } catch (const std::bad_alloc&) {
    return finish(CaseState::Skipped, "out of memory (lower --max-memory to skip such cases up front)");
  } catch (const Error& e) {
    return finish(CaseState::Failed, fmt::format("{}: {}", to_string(e.kind()), e.what()));
  }
}

}  // namespace d5
