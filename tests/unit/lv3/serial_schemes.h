#pragma once
// A serial simulation of the distributed schemes' arithmetic, the oracle the MPI runs are checked
// against. It is written from the schemes' documented semantics (docs/distributed-optimizers.md,
// include/deep500/dist/distributed_optimizers.h) and uses nothing from src/lv3: N replicas live in
// one process as flat parameter vectors, and the exchanges are plain loops over them. The model
// enters only through a gradient function, so the simulation is the same for a network trained
// by the library's tests and for one trained by `d5 train --dist`.
//
// The wrapped optimizer is SGD with heavy-ball momentum as torch.optim.SGD computes it on float32
// tensors without dampening, weight decay or Nesterov: v = g on a parameter's first update, then
// buf.mul_(mu).add_(g) (two roundings), and p.add_(v, alpha=-lr) (one fused rounding); momentum 0
// is plain SGD. Sums over ranks are taken in double and rounded once, so there the oracle's own
// rounding is below float32's.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace d5::test {

using Flat = std::vector<float>;

// Rank r's gradient at step t for the parameters p; the batch is a function of (r, t).
using GradientAt = std::function<Flat(int rank, int64_t step, const Flat& params)>;

struct SgdRule {
  double lr = 0.1;
  double momentum = 0;
};

// One copy of the optimizer's state (a rank's, or the parameter server's only one).
class SerialSgd {
 public:
  explicit SerialSgd(SgdRule rule) : rule_(rule) {}
  void apply(Flat& params, const Flat& gradient);

 private:
  SgdRule rule_;
  std::vector<float> velocity_;  // empty before the first update
};

struct SchemeSpec {
  std::string scheme = "dsgd";  // dsgd, pssgd, asgd (served in rank order), ssgd, mavg, dpsgd, sparse
  int64_t staleness = 0;        // ssgd
  int64_t average_every = 1;    // mavg
  double topk = 1;              // sparse: the fraction of elements each rank sends
};

struct SerialOutcome {
  std::vector<Flat> params;  // every rank's final parameters, after the scheme's finish
  int64_t dense_steps = 0;   // sparse: steps whose gathered pairs would outweigh a dense vector
};

// The parameters every rank ends with after `steps` steps of the scheme on `ranks` replicas that
// all start from `initial`. InvalidArgument-like std::invalid_argument for an unknown scheme.
SerialOutcome simulate_scheme(const SchemeSpec& spec, int ranks, int64_t steps, const Flat& initial,
                              const SgdRule& rule, const GradientAt& gradient);

// The largest |got - want| / max(|want|, floor) over the elements: relative error, with `floor`
// standing for the magnitude of the values a near-zero element was computed from.
double worst_relative_difference(const Flat& got, const Flat& want, double floor);

}  // namespace d5::test
