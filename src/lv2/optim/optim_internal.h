#pragma once
// Pieces the reference optimizers share: per-parameter state buffers, scalar state entries,
// float32 checks and the element loop (vectorized chunks, OpenMP across chunks for large tensors).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "deep500/core/error.h"
#include "deep500/spi/fused_update.h"
#include "deep500/train/optimizer.h"

namespace d5::optim {

Tensor scalar_tensor(double v);
// The scalar under `key`; InvalidArgument naming the optimizer and key when absent or not a scalar.
double scalar_of(const OptimizerState& state, const std::string& key, const std::string& optimizer);

// The tensor under `key`; InvalidArgument naming the optimizer and key when absent.
const Tensor& state_entry(const OptimizerState& state, const std::string& key, const std::string& optimizer);

// InvalidArgument unless grad and param are float32 tensors on one device: the host, or a device
// whose kind has the built-in rules (spi/fused_update.h).
void check_f32(const std::string& optimizer, const std::string& param, const Tensor& grad, const Tensor& param_value);

// A piece of an optimizer's state that saves itself under its own key prefix.
class StatePart {
 public:
  virtual ~StatePart() = default;
  virtual void save(OptimizerState& s) const = 0;
  virtual void load(const OptimizerState& s) = 0;
};

// An optimizer whose state is the base's plus the parts it lists in parts_.
template <typename Base>
class WithStateParts : public Base {
 public:
  OptimizerState state() const override {
    OptimizerState s = Base::state();
    for (const StatePart* p : parts_) p->save(s);
    return s;
  }
  void load_state(const OptimizerState& s) override {
    Base::load_state(s);
    for (StatePart* p : parts_) p->load(s);
  }

 protected:
  using Base::Base;
  std::vector<StatePart*> parts_;
};

// One named buffer per parameter (momentum, exp_avg, ...), created on first use, saved in the
// state as "<buffer>/<param>".
class Buffers final : public StatePart {
 public:
  explicit Buffers(std::string name) : name_(std::move(name)) {}
  bool has(const std::string& param) const { return m_.count(param) != 0; }
  // The buffer for `param`, created like `like` and filled with `init` when new.
  float* get(const std::string& param, const Tensor& like, double init = 0);
  void save(OptimizerState& s) const override;
  void load(const OptimizerState& s) override;

 private:
  std::string name_;
  std::map<std::string, Tensor> m_;
};

// Per-parameter scalars (step counts, AcceleGrad's sums), saved as "<name>/<param>".
class Scalars final : public StatePart {
 public:
  explicit Scalars(std::string name) : name_(std::move(name)) {}
  double& operator[](const std::string& param) { return m_[param]; }
  bool has(const std::string& param) const { return m_.count(param) != 0; }
  void save(OptimizerState& s) const override;
  void load(const OptimizerState& s) override;

 private:
  std::string name_;
  std::map<std::string, double> m_;
};

inline constexpr int64_t kChunk = 1 << 15;

// While a DeferredChunks is alive on a thread, for_chunks there records its work instead of running
// it, and run() executes every recorded chunk of every parameter in one OpenMP region: one fork per
// step instead of one per parameter. (Adam over ResNet-50's 161 tensors of 10M parameters took
// 2.93 ms against 2.18 ms for one tensor of the same size, 0.63 of the bandwidth reference.)
// Recorded bodies must capture by value: they run after the update_rule that made them returns.
// Each element sees the same kernel and scalars as without deferral, so results are bitwise equal.
class DeferredChunks {
 public:
  using Body = std::function<void(int64_t, int64_t)>;
  DeferredChunks();
  ~DeferredChunks();  // runs what is still recorded
  DeferredChunks(const DeferredChunks&) = delete;
  DeferredChunks& operator=(const DeferredChunks&) = delete;
  void add(int64_t n, Body body);
  // A device's update, launched in run() with the other updates of its device.
  void add(Device device, const FusedUpdate& update);
  void run();
  static DeferredChunks* current();

 private:
  struct Work {
    size_t body;
    int64_t begin, end;
  };
  std::vector<Body> bodies_;
  std::vector<Work> work_;
  std::vector<std::pair<Device, FusedUpdate>> device_work_;
  DeferredChunks* outer_;
};

// Runs body(begin, end) over [0, n) in chunks; chunks run on OpenMP threads when n is large
// enough to pay for the fork (or later, with the other parameters', under a DeferredChunks).
// Each body is a plain loop the compiler vectorizes.
template <typename Body>
void for_chunks(int64_t n, const Body& body) {
  if (DeferredChunks* deferred = DeferredChunks::current()) {
    deferred->add(n, body);
    return;
  }
  const int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (chunks > 2)
  for (int64_t c = 0; c < chunks; ++c) body(c * kChunk, std::min(n, (c + 1) * kChunk));
}

// Element kernels are compiled twice, for x86-64-v3 (AVX2 + FMA) and the baseline, and the loader
// picks one per CPU. They round as ATen's float kernels do, so that updates match torch::optim's
// bit for bit where the operation order allows: ATen's add(self, other, alpha) is one fused
// multiply-add (madd below), while addcmul/addcdiv/mul are separate roundings.
// Not under ThreadSanitizer: GCC instruments the clones' ifunc resolver, which the dynamic loader
// runs before the sanitizer's runtime exists, and the process dies during relocation.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_THREAD__)
#define D5_OPTIM_KERNEL __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define D5_OPTIM_KERNEL
#endif
// self + alpha * other, rounded once.
inline float madd(float self, float other, float alpha) { return std::fma(other, alpha, self); }

// The host's element loops of each rule over [b, e), defined beside the rule (with D5_OPTIM_KERNEL
// there: declared without it, a call binds to the clones' resolver the definition exports).
void sgd_kernel(int64_t b, int64_t e, const float* g, float* p, float* v, const SgdScalars& s);
void adam_kernel(int64_t b, int64_t e, const float* g, float* p, float* m, float* v, float* vmax,
                                 const AdamScalars& s);
void adagrad_kernel(int64_t b, int64_t e, const float* g, float* p, float* sum,
                                    const AdagradScalars& s);
void rmsprop_kernel(int64_t b, int64_t e, const float* g, float* p, float* a, float* ga, float* buf,
                                    const RmsPropScalars& s);
void accelegrad_interpolate_kernel(int64_t b, int64_t e, float* p, const float* z, const AcceleGradScalars& s);
void accelegrad_step_kernel(int64_t b, int64_t e, const float* g, float* p, float* z, const AcceleGradScalars& s);

// The record of one update of `param` by `grad` (g null when the kind reads no gradient); the
// rule adds its state buffers and scalars.
inline FusedUpdate update_of(UpdateKind kind, const Tensor* grad, Tensor& param) {
  FusedUpdate u;
  u.kind = kind;
  u.n = param.numel();
  u.g = grad ? static_cast<const float*>(grad->data()) : nullptr;  // check_f32 checked the dtypes;
  u.p = static_cast<float*>(param.data());                           // the memory may be a device's
  return u;
}

// Runs one update where its tensors live (`device`): on the host with the element loops above, on
// a device through its FusedUpdates; under a DeferredChunks both wait for its run().
void run_update(Device device, const FusedUpdate& update);
// Each tensor's sum of squares in double, on the host or on the tensors' devices (one call per
// device).
std::vector<double> squared_norms(const std::vector<const Tensor*>& tensors);

// Factories of the reference optimizers, registered by register_builtin_optimizers().
std::unique_ptr<Optimizer> make_sgd(const Hyperparameters& h, const std::string& variant);  // sgd|momentum|nesterov
std::unique_ptr<Optimizer> make_adam(const Hyperparameters& h, bool decoupled);
std::unique_ptr<Optimizer> make_adagrad(const Hyperparameters& h);
std::unique_ptr<Optimizer> make_rmsprop(const Hyperparameters& h);
std::unique_ptr<Optimizer> make_accelegrad(const Hyperparameters& h);
std::unique_ptr<Optimizer> make_lbfgs(const Hyperparameters& h);

}  // namespace d5::optim
