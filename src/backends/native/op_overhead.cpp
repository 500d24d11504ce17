// deep500's operator against the library called directly (deep500/op/op_overhead.h).
#include "deep500/op/op_overhead.h"

#include <algorithm>
#include <climits>
#include <functional>

#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "deep500/core/error.h"
#include "deep500/metrics/statistics.h"
#include "deep500/metrics/timing_loops.h"
#include "deep500/op/native_calls.h"
#include "deep500/op/op_bench.h"
#include "deep500/op/validation.h"

namespace d5 {

namespace {

double median_of(const std::vector<double>& v) { return percentile(v, 50); }

// The two sides of a case: each runs a given number of timed calls and returns their seconds.
struct Sides {
  std::function<std::vector<double>(int)> d5, native;
};

// Rounds of `runs` calls per side, alternating which goes first; round 0 warms caches,
// allocators and clocks for both and is dropped.
void interleave(const Sides& sides, int runs, int rounds, OverheadMeasurement& m) {
  for (int r = 0; r <= rounds; ++r) {
    std::vector<double> h, n;
    if (r % 2 == 0) {
      h = sides.d5(runs);
      n = sides.native(runs);
    } else {
      n = sides.native(runs);
      h = sides.d5(runs);
    }
    if (r == 0) continue;
    m.ratios.push_back(median_of(h) / median_of(n));
    m.d5_seconds.push_back(median_of(h));
    m.native_seconds.push_back(median_of(n));
  }
}

int runs_per_round(double round_seconds, double probe) {
  return static_cast<int>(std::clamp(round_seconds / probe, 5.0, 500.0));
}

// On the host: owned outputs, as an executor allocates them (the torch backend rebinds them to
// ATen's fresh results, so each call frees the previous result when the next is ready, as
// `last = conv2d(..)` does on the native side).
void measure_host(Operator& op, NativeCall& native, const std::vector<Tensor>& inputs, const OverheadSettings& s,
                  OverheadMeasurement& m) {
  std::vector<Tensor> outputs;
  for (const auto& d : op.output_descs()) outputs.push_back(Tensor::uninitialized(d));
  auto d5_call = [&] { op.forward(inputs, outputs); };
  const int runs = runs_per_round(s.round_seconds, median_of(hand_loop(d5_call, 3)));
  interleave({[&](int n) { return harness_runs(d5_call, n); }, [&](int n) { return hand_loop(native.run, n); }}, runs,
             s.rounds, m);
  m.timing = "steady_clock";
}

// On the operator's device (inputs already there): both sides timed alike by the device's clock
// around the call alone, caches flushed before: deep500's through its runner with the DeviceTime
// metric first, the native one in a hand loop.
void measure_device(Operator& op, NativeCall& native, const std::vector<Tensor>& inputs, const OverheadSettings& s,
                    OverheadMeasurement& m) {
  const Device dev = op.device();
  std::vector<Tensor> outputs;
  for (const auto& d : op.output_descs()) outputs.push_back(Tensor::uninitialized(d, dev));
  const auto d5_timed = device_clock(dev), native_timed = device_clock(dev);
  auto d5_call = [&] { op.forward(inputs, outputs); };
  const int runs = runs_per_round(s.round_seconds, median_of(hand_device_loop(d5_call, 3, *d5_timed)));
  interleave({[&](int n) { return harness_device_runs(d5_call, n, *d5_timed); },
              [&](int n) { return hand_device_loop(native.run, n, *native_timed); }},
             runs, s.rounds, m);
  m.timing = "device time (" + d5_timed->describe() + "), the device synchronised after each run";
}

}  // namespace

OverheadMeasurement measure_op_overhead(const std::string& backend, const Problem& p, Operator& op,
                                        const OverheadSettings& s) {
  D5_CHECK_ARG(s.rounds >= 6, "rounds must be >= 6 for a 95% CI of the median, got {}", s.rounds);
  D5_CHECK_ARG(s.round_seconds > 0 && s.min_us >= 0, "round seconds must be > 0 and min us >= 0");
  OverheadMeasurement m;
  m.d5_implementation = op.implementation();
  const Device dev = op.device();
  const bool on_device = dev.kind != DeviceKind::cpu;
  const auto host_inputs = generate_inputs(p);
  // A device operator is handed inputs already on its device, as an executor places them; the
  // native side copies the host inputs to buffers of its own, also before anything is timed.
  const std::vector<Tensor> inputs = on_device ? to_device(host_inputs, dev) : host_inputs;
  // The onednn backend lets oneDNN choose formats and reorders at the boundary on every call; the
  // native side does the same, so the ratio is deep500's cost, not a choice. On cuDNN the native
  // side runs the forward algorithm the operator chose.
  auto native = make_native_call(
      backend, p, host_inputs, &m.why,
      NativeMatch{.layout = NativeLayout::Boundary, .d5_implementation = op.implementation(), .device_index = dev.index});
  if (!native) {
    m.outcome = OverheadMeasurement::Outcome::NoNative;
    return m;
  }
  m.native_implementation = native->implementation;
  // Both must compute the same thing, or the ratio compares different work.
  const std::vector<Tensor> outputs = op.run_forward(inputs);
  native->run();
  const auto cmp = compare_output(native->result(), to_device(outputs, Device::cpu())[0],
                                  check_tolerance(DType::f32, p.spec.type, p.forward_reduction), 0);
  m.max_abs_difference = cmp.max_abs_error;
  if (cmp.mismatches > 0) {
    m.outcome = OverheadMeasurement::Outcome::OutputsDiffer;
    m.why = fmt::format("the native and deep500 outputs differ: {} elements outside the tolerance, max |diff| {:.3g}",
                        cmp.mismatches, cmp.max_abs_error);
    return m;
  }
  const std::unique_ptr<DeviceRun> probe_timer = on_device ? device_clock(dev) : nullptr;
  const double probe =
      median_of(on_device ? hand_device_loop(native->run, 3, *probe_timer) : hand_loop(native->run, 3));
  if (probe < s.min_us * 1e-6) {
    m.outcome = OverheadMeasurement::Outcome::TooShort;
    m.why = fmt::format("the native call takes {:.1f} us, under {} us: too short for a stable ratio", probe * 1e6,
                        s.min_us);
    return m;
  }
  if (on_device)
    measure_device(op, *native, inputs, s, m);
  else
    measure_host(op, *native, inputs, s, m);
  return m;
}

bool keep_freed_memory() {
#ifdef __GLIBC__
  return mallopt(M_MMAP_MAX, 0) == 1 && mallopt(M_TRIM_THRESHOLD, INT_MAX) == 1;
#else
  return false;
#endif
}

}  // namespace d5
