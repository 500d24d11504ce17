// CTCLoss (deep500's operator, src/backends/reference/ops/ctc_loss.cpp) on at::_ctc_loss, with
// at::ctc_loss's zero_infinity and reductions written out, for one change to its gradient. ATen's
// backward of _ctc_loss returns the gradient with respect to the logits behind a log_softmax,
// exp(log_probs) more than the derivative with respect to log_probs that the operator defines (the
// two agree once a LogSoftmax's backward has run). The kernel takes that term back out with
// m_n - detach(m_n), m_n = the sum of exp(log_probs) over sample n's first input_lengths[n] steps:
// exactly 0 forward, exp(log_probs) times the upstream gradient backward. An infinite loss keeps
// ATen's gradient: 0 with zero_infinity, NaN on its steps without.
// ATen checks neither the labels (the CPU kernel reads log_probs at whatever index a label holds)
// nor input lengths below 1, so the kernel checks lengths and labels first, as the reference does.
#include <limits>

#include "deep500/core/error.h"
#include "torch_op.h"

namespace d5::torch_backend {

namespace {

using TensorList = std::vector<at::Tensor>;

std::vector<int64_t> ints_of(const at::Tensor& t) {
  // Read on the host (ATen's CTC takes the lengths as integers there, on every device).
  const at::Tensor l = t.to(at::kCPU, at::kLong).contiguous();
  return {l.data_ptr<int64_t>(), l.data_ptr<int64_t>() + l.numel()};
}

struct CtcShape {
  int64_t steps = 0, classes = 0, width = 0, blank = 0;
};

// The reference's run-time checks, in its words.
void check_samples(const OpSpec& s, const CtcShape& d, const std::vector<int64_t>& targets,
                   const std::vector<int64_t>& input_lengths, const std::vector<int64_t>& target_lengths) {
  for (size_t n = 0; n < input_lengths.size(); ++n) {
    const int64_t steps = input_lengths[n], labels = target_lengths[n];
    D5_CHECK_ARG(steps >= 1 && steps <= d.steps,
                 "{}: input_lengths[{}] = {} is outside [1, {}] (T, log_probs' first axis)", s.label(), n, steps,
                 d.steps);
    D5_CHECK_ARG(labels >= 0 && labels <= d.width,
                 "{}: target_lengths[{}] = {} is outside [0, {}] (S, targets' second axis)", s.label(), n, labels,
                 d.width);
    for (int64_t i = 0; i < labels; ++i) {
      const int64_t label = targets[n * static_cast<size_t>(d.width) + static_cast<size_t>(i)];
      D5_CHECK_ARG(label >= 0 && label < d.classes && label != d.blank,
                   "{}: targets[{}, {}] = {} must be a class in [0, {}) other than blank ({})", s.label(), n, i,
                   label, d.classes, d.blank);
    }
  }
}

Built build_ctc_loss(const OpSpec& s) {
  const CtcShape d{s.inputs[0].shape[0], s.inputs[0].shape[2], s.inputs[1].shape[1], s.attrs.get_int("blank", 0)};
  const bool zero_infinity = s.attrs.get_int("zero_infinity", 0) != 0;
  const std::string reduction = s.attrs.get_string("reduction", "mean");
  const OpSpec spec = s;
  return OpDef{single([=](const TensorList& in) {
                 const at::Tensor& lp = in[0];
                 const at::Tensor targets = in[1].to(at::kLong).contiguous();
                 const auto input_lengths = ints_of(in[2]), target_lengths = ints_of(in[3]);
                 check_samples(spec, d, ints_of(targets), input_lengths, target_lengths);
                 at::Tensor loss =
                     std::get<0>(at::_ctc_loss(lp, targets, input_lengths, target_lengths, d.blank, zero_infinity));
                 if (lp.requires_grad()) {
                   const at::Tensor inside =
                       (at::arange(d.steps, lp.options().dtype(at::kLong)).unsqueeze(1) <
                        at::tensor(input_lengths).to(lp.device()).unsqueeze(0))
                           .to(lp.scalar_type());
                   const at::Tensor mass = (lp.exp() * inside.unsqueeze(2)).sum(at::IntArrayRef{0, 2});
                   loss = loss - (mass - mass.detach());
                 }
                 if (zero_infinity)
                   loss = at::where(loss == std::numeric_limits<double>::infinity(), at::zeros({}, loss.options()),
                                    loss);
                 if (reduction == "sum") return loss.sum();
                 // Per target label, then per sample; an empty target counts as one label.
                 if (reduction == "mean") return (loss / in[3].to(loss.scalar_type()).clamp_min(1)).mean();
                 return loss;
               }),
               "at::_ctc_loss"};
}

}  // namespace

void register_ctc_ops(OpRegistry& r) {
  add_torch_op(
      r, "CTCLoss", true, [](const OpSpec& s, const OpSemantics&) { return build_ctc_loss(s); },
      "f32, f64; int32/int64 padded targets and lengths; the gradient is d loss / d log_probs (ATen's "
      "exp(log_probs) term of a log_softmax taken out)");
}

}  // namespace d5::torch_backend
