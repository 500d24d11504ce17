#pragma once
// Pieces the reference optimizers share: per-parameter state buffers, scalar state entries,
// float32 checks and the element loop (vectorized chunks, OpenMP across chunks for large tensors).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "deep500/error.h"
#include "deep500/optimizer.h"

namespace d5::optim {

Tensor scalar_tensor(double v);
// The scalar under `key`; InvalidArgument naming the optimizer and key when absent or not a scalar.
double scalar_of(const OptimizerState& state, const std::string& key, const std::string& optimizer);

// The tensor under `key`; InvalidArgument naming the optimizer and key when absent.
const Tensor& state_entry(const OptimizerState& state, const std::string& key, const std::string& optimizer);

// InvalidArgument unless grad and param are float32 tensors of one shape on the host.
void check_f32(const std::string& optimizer, const std::string& param, const Tensor& grad, const Tensor& param_value);

// One named buffer per parameter (momentum, exp_avg, ...), created on first use, saved in the
// state as "<buffer>/<param>".
class Buffers {
 public:
  explicit Buffers(std::string name) : name_(std::move(name)) {}
  bool has(const std::string& param) const { return m_.count(param) != 0; }
  // The buffer for `param`, created like `like` and filled with `init` when new.
  float* get(const std::string& param, const Tensor& like, double init = 0);
  void save(OptimizerState& s) const;
  void load(const OptimizerState& s);

 private:
  std::string name_;
  std::map<std::string, Tensor> m_;
};

// Per-parameter scalars (step counts, AcceleGrad's sums), saved as "<name>/<param>".
class Scalars {
 public:
  explicit Scalars(std::string name) : name_(std::move(name)) {}
  double& operator[](const std::string& param) { return m_[param]; }
  bool has(const std::string& param) const { return m_.count(param) != 0; }
  void save(OptimizerState& s) const;
  void load(const OptimizerState& s);

 private:
  std::string name_;
  std::map<std::string, double> m_;
};

// Runs body(begin, end) over [0, n) in chunks; chunks run on OpenMP threads when n is large
// enough to pay for the fork. Each body is a plain loop the compiler vectorizes.
inline constexpr int64_t kChunk = 1 << 15;
template <typename Body>
void for_chunks(int64_t n, const Body& body) {
  const int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (chunks > 2)
  for (int64_t c = 0; c < chunks; ++c) body(c * kChunk, std::min(n, (c + 1) * kChunk));
}

// Factories of the reference optimizers, registered by register_builtin_optimizers().
std::unique_ptr<Optimizer> make_sgd(const Hyperparameters& h, const std::string& variant);  // sgd|momentum|nesterov
std::unique_ptr<Optimizer> make_adam(const Hyperparameters& h, bool decoupled);
std::unique_ptr<Optimizer> make_adagrad(const Hyperparameters& h);
std::unique_ptr<Optimizer> make_rmsprop(const Hyperparameters& h);
std::unique_ptr<Optimizer> make_accelegrad(const Hyperparameters& h);
std::unique_ptr<Optimizer> make_lbfgs(const Hyperparameters& h);

}  // namespace d5::optim
