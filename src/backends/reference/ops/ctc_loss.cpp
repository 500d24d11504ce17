// CTCLoss: connectionist temporal classification (Graves et al., 2006), a deep500 operator, not an
// ONNX one (ONNX has no CTC loss), with the semantics of torch.nn.functional.ctc_loss.
// Inputs: log_probs [T, N, C] (f32 or f64: log-probabilities of C classes at each of T steps, a
// LogSoftmax's output), targets [N, S] (int32 or int64, padded: sample n's labels are
// targets[n, 0:target_lengths[n]], each a class in [0, C) other than blank; the padding is not
// read), input_lengths [N] and target_lengths [N] (int32 or int64, 1 <= input_lengths[n] <= T,
// 0 <= target_lengths[n] <= S). Attributes: blank (class index, 0), reduction ("mean"),
// zero_infinity (0).
//
// Sample n, with T' = input_lengths[n], labels l_1..l_L and y_t(c) = exp(log_probs[t, n, c]): the
// extended sequence l' = (blank, l_1, blank, l_2, ..., blank, l_L, blank) has 2L+1 entries. An
// alignment is a sequence of T' classes that gives l once repeats are merged and blanks removed;
//   p_n = sum over alignments a of prod_t y_t(a_t),    loss_n = -log p_n.
// The forward variable alpha_t(s), the probability of the alignment prefixes of steps 0..t that
// end in l'_s:
//   alpha_0(0) = y_0(blank),  alpha_0(1) = y_0(l_1),  alpha_0(s) = 0 for s > 1,
//   alpha_t(s) = y_t(l'_s) (alpha_{t-1}(s) + alpha_{t-1}(s-1) + skip_s alpha_{t-1}(s-2)),
//   p_n = alpha_{T'-1}(2L) + alpha_{T'-1}(2L-1),
// where skip_s = 1 when l'_s is a label other than l'_{s-2}: a path may leave a blank out only
// between different labels. A target therefore needs L + (number of i with l_i = l_{i+1}) steps;
// with fewer, p_n = 0 and loss_n = +inf (0 with zero_infinity=1). Everything runs in log space,
// additions as log-sum-exp in double.
// Reduction: "none" gives [N]; "sum" sum_n loss_n; "mean" (1/N) sum_n loss_n / max(L_n, 1), the
// loss per target label averaged over the batch, as torch does.
//
// Gradient (log_probs only: the other inputs are integers). The backward variable beta_t(s) is the
// same recursion from the last step (y_t(l'_s) included, so it counts step t twice with alpha):
//   beta_{T'-1}(2L) = y_{T'-1}(blank),  beta_{T'-1}(2L-1) = y_{T'-1}(l_L),
//   beta_t(s) = y_t(l'_s) (beta_{t+1}(s) + beta_{t+1}(s+1) + skip_{s+2} beta_{t+1}(s+2)),
// so alpha_t(s) beta_t(s) / y_t(l'_s) is the probability of the alignments that sit at l'_s at
// step t, and p_n is their sum over s at any t. Every alignment holds y_t(c) once per step at c, so
//   d loss_n / d log_probs[t, n, c] = -(1/p_n) sum_{s: l'_s = c} alpha_t(s) beta_t(s) / y_t(c)
//                                   = -exp(log_ab_t(c) - log_probs[t, n, c] + loss_n)
// for t < T' (0 from T' on), with log_ab_t(c) = log sum_{s: l'_s = c} alpha_t(s) beta_t(s), times
// the reduction's factor (1, or 1 / (N max(L_n, 1)) for "mean"). This is the derivative with
// respect to the log_probs input itself. torch's own backward of ctc_loss returns exp(log_probs)
// more: the gradient with respect to logits behind a log_softmax, which is the same thing once a
// LogSoftmax's backward has run (this gradient sums to -1 over c at each step for normalized
// log_probs, so the log_softmax removes exactly the extra exp(log_probs)). A class no alignment
// visits at step t gets 0 (torch: NaN where log_probs is -inf). An infinite loss has gradient 0
// with zero_infinity=1 and NaN on its sample's first T' steps without, as torch gives.
#include <algorithm>
#include <cmath>
#include <limits>

#include "norm_common.h"

namespace d5::reference {

namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// log(exp(a) + exp(b)) without overflow.
double log_add(double a, double b) {
  if (a < b) std::swap(a, b);
  if (b == kNegInf) return a;
  return a + std::log1p(std::exp(b - a));
}

int64_t int_at(const Tensor& t, int64_t i) {
  return t.dtype() == DType::i64 ? t.data_as<int64_t>()[i] : t.data_as<int32_t>()[i];
}

bool is_index_dtype(DType t) { return t == DType::i32 || t == DType::i64; }

// One sample's steps and extended label sequence l'.
struct Sample {
  int64_t steps = 0, labels = 0;
  std::vector<int64_t> ext;
};

class CtcLossOp : public ReferenceOp {
 public:
  explicit CtcLossOp(const OpSpec& s) : ReferenceOp(s, outputs_of(s)), reduction_(parse_reduction(s)) {
    const Shape& lp = s.inputs[0].shape;
    t_ = lp[0];
    n_ = lp[1];
    c_ = lp[2];
    s_ = s.inputs[1].shape[1];
    blank_ = s.attrs.get_int("blank", 0);
    zero_infinity_ = s.attrs.get_int("zero_infinity", 0) != 0;
  }

  void forward(std::span<const Tensor> in, std::span<Tensor> out) override {
    check_inputs(in);
    const auto samples = read_samples(in);
    dispatch_float(in[0].dtype(), spec_, [&]<typename T>() {
      const T* lp = in[0].data_as<T>();
      T* o = out[0].data_as<T>();
      double sum = 0;
      for (int64_t n = 0; n < n_; ++n) {
        const Sample& smp = samples[static_cast<size_t>(n)];
        double loss = nll(lattice(lp, n, smp, false), smp);
        if (zero_infinity_ && loss == INFINITY) loss = 0;
        if (reduction_ == Reduction::None) o[n] = static_cast<T>(loss);
        sum += reduction_ == Reduction::Mean ? loss / static_cast<double>(std::max<int64_t>(smp.labels, 1)) : loss;
      }
      if (reduction_ == Reduction::Sum) o[0] = static_cast<T>(sum);
      if (reduction_ == Reduction::Mean) o[0] = static_cast<T>(sum / static_cast<double>(n_));
    });
  }

  std::vector<bool> differentiable_inputs() const override { return {true, false, false, false}; }

  // The formula of the header, per sample, with alpha recomputed (backward keeps no state).
  void backward(std::span<const Tensor> gy, std::span<const Tensor> in, std::span<const Tensor>,
                std::span<Tensor> gx) override {
    if (!gx[0].defined()) return;
    gx[0].fill(0);
    if (!gy[0].defined()) return;
    const auto samples = read_samples(in);
    std::vector<double> log_ab(static_cast<size_t>(c_));
    dispatch_float(in[0].dtype(), spec_, [&]<typename T>() {
      const T* lp = in[0].data_as<T>();
      T* d = gx[0].data_as<T>();
      for (int64_t n = 0; n < n_; ++n) {
        const Sample& smp = samples[static_cast<size_t>(n)];
        const auto alpha = lattice(lp, n, smp, false);
        const double loss = nll(alpha, smp);
        if (zero_infinity_ && loss == INFINITY) continue;
        const double up = upstream(gy[0], n, smp);
        const auto beta = lattice(lp, n, smp, true);
        const auto width = static_cast<int64_t>(smp.ext.size());
        for (int64_t t = 0; t < smp.steps; ++t) {
          std::fill(log_ab.begin(), log_ab.end(), kNegInf);
          for (int64_t s = 0; s < width; ++s) {
            double& v = log_ab[static_cast<size_t>(smp.ext[static_cast<size_t>(s)])];
            v = log_add(v, alpha[static_cast<size_t>(t * width + s)] + beta[static_cast<size_t>(t * width + s)]);
          }
          for (int64_t c = 0; c < c_; ++c) {
            const int64_t j = (t * n_ + n) * c_ + c;
            const double ab = log_ab[static_cast<size_t>(c)];
            const double g = std::isinf(loss) ? std::numeric_limits<double>::quiet_NaN()
                             : ab == kNegInf  ? 0.0
                                              : -std::exp(ab - static_cast<double>(lp[j]) + loss) * up;
            d[j] = static_cast<T>(g);
          }
        }
      }
    });
  }

  // A lattice cell is a log-sum-exp of up to three terms (2 comparisons, 3 subtractions, 3 exps,
  // 2 additions, a log, an addition) plus the emission: about 12 operations, over T x N x (2S+1)
  // cells at most. Backward recomputes alpha, runs beta, adds each alpha beta into its class (a
  // log-sum-exp: 6) and forms each of the T x N x C gradients (4).
  double flops() const override { return kCellFlops * cells() + 2 * static_cast<double>(n_); }
  double backward_flops() const override {
    return (2 * kCellFlops + 6) * cells() + 4 * static_cast<double>(t_ * n_ * c_);
  }

 private:
  static constexpr double kCellFlops = 12;

  static std::vector<TensorDesc> outputs_of(const OpSpec& s) {
    D5_CHECK_ARG(s.inputs.size() == 4 && s.has_input(0) && s.has_input(1) && s.has_input(2) && s.has_input(3),
                 "{}: needs 4 inputs (log_probs, targets, input_lengths, target_lengths), got {}", s.label(),
                 s.inputs.size());
    const TensorDesc& lp = s.inputs[0];
    dispatch_float(lp.dtype, s, []<typename T>() {});
    D5_CHECK_ARG(lp.shape.rank() == 3, "{}: log_probs must be [T, N, C], got {}", s.label(), lp.shape.to_string());
    const int64_t n = lp.shape[1], c = lp.shape[2];
    const TensorDesc& targets = s.inputs[1];
    D5_CHECK_ARG(is_index_dtype(targets.dtype) && targets.shape.rank() == 2 && targets.shape[0] == n,
                 "{}: targets must be int32 or int64 [N, S] with N = {} (log_probs' second axis), got {}",
                 s.label(), n, targets.to_string());
    for (size_t i : {size_t{2}, size_t{3}}) {
      const char* name = i == 2 ? "input_lengths" : "target_lengths";
      D5_CHECK_ARG(is_index_dtype(s.inputs[i].dtype) && s.inputs[i].shape == Shape{n},
                   "{}: {} must be int32 or int64 [{}] (one per sample), got {}", s.label(), name, n,
                   s.inputs[i].to_string());
    }
    const int64_t blank = s.attrs.get_int("blank", 0);
    D5_CHECK_ARG(blank >= 0 && blank < c, "{}: blank={} is not a class of log_probs' C={} classes", s.label(), blank,
                 c);
    const Reduction r = parse_reduction(s);
    return {TensorDesc{lp.dtype, r == Reduction::None ? Shape{n} : Shape{}}};
  }

  // Reads and checks the lengths and labels (they are data, known only when the op runs).
  std::vector<Sample> read_samples(std::span<const Tensor> in) const {
    std::vector<Sample> samples(static_cast<size_t>(n_));
    for (int64_t n = 0; n < n_; ++n) {
      Sample& smp = samples[static_cast<size_t>(n)];
      smp.steps = int_at(in[2], n);
      smp.labels = int_at(in[3], n);
      D5_CHECK_ARG(smp.steps >= 1 && smp.steps <= t_,
                   "{}: input_lengths[{}] = {} is outside [1, {}] (T, log_probs' first axis)", spec_.label(), n,
                   smp.steps, t_);
      D5_CHECK_ARG(smp.labels >= 0 && smp.labels <= s_,
                   "{}: target_lengths[{}] = {} is outside [0, {}] (S, targets' second axis)", spec_.label(), n,
                   smp.labels, s_);
      smp.ext.assign(static_cast<size_t>(2 * smp.labels + 1), blank_);
      for (int64_t i = 0; i < smp.labels; ++i) {
        const int64_t label = int_at(in[1], n * s_ + i);
        D5_CHECK_ARG(label >= 0 && label < c_ && label != blank_,
                     "{}: targets[{}, {}] = {} must be a class in [0, {}) other than blank ({})", spec_.label(), n,
                     i, label, c_, blank_);
        smp.ext[static_cast<size_t>(2 * i + 1)] = label;
      }
    }
    return samples;
  }

  // log alpha (from the first step) or log beta (from_end), [steps][2L+1] row-major.
  template <typename T>
  std::vector<double> lattice(const T* lp, int64_t n, const Sample& smp, bool from_end) const {
    const int64_t len = smp.steps, width = static_cast<int64_t>(smp.ext.size());
    const auto y = [&](int64_t t, int64_t s) {
      return static_cast<double>(lp[(t * n_ + n) * c_ + smp.ext[static_cast<size_t>(s)]]);
    };
    std::vector<double> a(static_cast<size_t>(len * width), kNegInf);
    const auto at = [&](int64_t t, int64_t s) -> double& { return a[static_cast<size_t>(t * width + s)]; };
    // Alignments start at the leading blank or the first label and end at the last label or the
    // trailing blank.
    const int64_t t0 = from_end ? len - 1 : 0;
    for (int64_t k = 0; k < std::min<int64_t>(2, width); ++k) {
      const int64_t s = from_end ? width - 1 - k : k;
      at(t0, s) = y(t0, s);
    }
    const int64_t dir = from_end ? 1 : -1;  // where a cell's predecessors lie along s
    for (int64_t step = 1; step < len; ++step) {
      const int64_t t = from_end ? len - 1 - step : step, prev = t + dir;
      for (int64_t s = 0; s < width; ++s) {
        double v = at(prev, s);
        const int64_t s1 = s + dir, s2 = s + 2 * dir;
        if (s1 >= 0 && s1 < width) v = log_add(v, at(prev, s1));
        // Labels sit at odd s: s and s2 are both labels or both blanks.
        if (s2 >= 0 && s2 < width && smp.ext[static_cast<size_t>(s)] != blank_ &&
            smp.ext[static_cast<size_t>(s2)] != smp.ext[static_cast<size_t>(s)])
          v = log_add(v, at(prev, s2));
        at(t, s) = v == kNegInf ? kNegInf : v + y(t, s);
      }
    }
    return a;
  }

  // -log p from log alpha: the alignments end at the trailing blank or the last label.
  static double nll(const std::vector<double>& alpha, const Sample& smp) {
    const auto width = static_cast<int64_t>(smp.ext.size());
    const int64_t last = (smp.steps - 1) * width;
    double p = alpha[static_cast<size_t>(last + width - 1)];
    if (width > 1) p = log_add(p, alpha[static_cast<size_t>(last + width - 2)]);
    return -p;
  }

  // The factor of d loss_n in the output's gradient.
  double upstream(const Tensor& g, int64_t n, const Sample& smp) const {
    if (reduction_ == Reduction::None) return g.get(n);
    if (reduction_ == Reduction::Sum) return g.get(0);
    return g.get(0) / (static_cast<double>(n_) * static_cast<double>(std::max<int64_t>(smp.labels, 1)));
  }

  double cells() const { return static_cast<double>(t_ * n_ * (2 * s_ + 1)); }

  Reduction reduction_;
  int64_t t_ = 0, n_ = 0, c_ = 0, s_ = 0, blank_ = 0;
  bool zero_infinity_ = false;
};

}  // namespace

void register_ctc_loss_ops(OpRegistry& r) { add_op(r, "CTCLoss", true, make<CtcLossOp>); }

}  // namespace d5::reference
