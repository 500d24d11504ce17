// Unary element-wise operators on oneDNN's eltwise primitive. Each ONNX op is a chain of one or
// two eltwise steps (Selu = gamma * elu, HardSigmoid = clip(alpha x + beta, 0, 1)); oneDNN 2.6
// runs eltwise post-ops only in its reference kernel, so a second step is a second jit primitive
// working in place. The tensor is viewed as one flat axis: the operation does not care about shape.
#include <cmath>
#include <limits>

#include "onednn_common.h"

namespace d5::onednn {

namespace {

using alg = dnnl::algorithm;

struct EltStep {
  alg algorithm;
  float alpha = 0, beta = 0;
};

float attr_f(const OpSpec& s, const char* name, double def) {
  return static_cast<float>(s.attrs.get_float(name, def));
}

// Clip's bounds: attributes before opset 11, optional inputs 1 and 2 after, which oneDNN needs as
// constants when the primitive is made.
float clip_bound(const OpSpec& s, size_t input, const char* attr, float def) {
  if (!s.has_input(input)) return attr_f(s, attr, def);
  const Tensor* v = s.value(input);
  refuse_if(v == nullptr,
            "Clip's {} (input {}) must be a constant known when the operator is created: oneDNN "
            "takes the bounds as primitive parameters",
            attr, input);
  D5_CHECK_ARG(v->numel() == 1, "{}: {} (input {}) must be a scalar, got shape {}", s.label(), attr, input,
               v->shape().to_string());
  return static_cast<float>(v->get(0));
}

std::vector<EltStep> steps_of(const OpSpec& s) {
  const std::string& t = s.type;
  if (t == "Relu") return {{alg::eltwise_relu}};
  if (t == "LeakyRelu") return {{alg::eltwise_relu, attr_f(s, "alpha", 0.01)}};
  if (t == "Sigmoid") return {{alg::eltwise_logistic}};
  if (t == "Tanh") return {{alg::eltwise_tanh}};
  if (t == "Elu") return {{alg::eltwise_elu, attr_f(s, "alpha", 1.0)}};
  if (t == "Selu")
    return {{alg::eltwise_elu, attr_f(s, "alpha", 1.67326319217681884)},
            {alg::eltwise_linear, attr_f(s, "gamma", 1.05070102214050293), 0}};
  if (t == "Gelu") {
    const auto a = s.attrs.get_string("approximate", "none");
    D5_CHECK_ARG(a == "none" || a == "tanh", "{}: approximate='{}' must be 'none' or 'tanh'", s.label(), a);
    return {{a == "tanh" ? alg::eltwise_gelu_tanh : alg::eltwise_gelu_erf}};
  }
  if (t == "Softplus") return {{alg::eltwise_soft_relu}};
  if (t == "Mish") return {{alg::eltwise_mish}};
  if (t == "HardSigmoid")
    return {{alg::eltwise_linear, attr_f(s, "alpha", 0.2), attr_f(s, "beta", 0.5)},
            {alg::eltwise_clip_v2, 0, 1}};
  if (t == "HardSwish") return {{alg::eltwise_hardswish}};
  if (t == "Sqrt") return {{alg::eltwise_sqrt}};
  if (t == "Exp") return {{alg::eltwise_exp}};
  if (t == "Log") return {{alg::eltwise_log}};
  if (t == "Abs") return {{alg::eltwise_abs}};
  if (t == "Neg") return {{alg::eltwise_linear, -1, 0}};
  if (t == "Reciprocal") return {{alg::eltwise_pow, 1, -1}};
  // Clip: ONNX's min(max(x, lo), hi) is clip_v2; infinite bounds mean no bound.
  constexpr float inf = std::numeric_limits<float>::infinity();
  return {{alg::eltwise_clip_v2, clip_bound(s, 1, "min", -inf), clip_bound(s, 2, "max", inf)}};
}

memory::desc flat(const OpSpec& s) { return plain({std::max<int64_t>(1, s.inputs[0].numel())}); }

class EltwiseOp : public SingleInputOp {
 public:
  // With `io`, a forward-only variant (NativeLayoutOperator): an input in a oneDNN layout is
  // computed in it, and the output stays in it when io keeps it.
  explicit EltwiseOp(const OpSpec& s, const IoLayouts* io = nullptr) : SingleInputOp(s, outputs_of(s), flat(s)) {
    const memory::desc* x_in = io ? io->input(0) : nullptr;
    const auto md = x_in ? *x_in : flat(s);
    if (x_in) {
      exchange(md, md, io->keeps(0) ? md : plain(dims_of(s.inputs[0].shape)), md);
      if (io->keeps(0)) set_output_layout(0, md);
    }
    const auto steps = steps_of(s);
    const auto prop = io ? dnnl::prop_kind::forward_inference : dnnl::prop_kind::forward_training;
    std::vector<dnnl::eltwise_forward::primitive_desc> fwd;
    for (const EltStep& st : steps)
      fwd.emplace_back(dnnl::eltwise_forward::desc{prop, st.algorithm, md, st.alpha, st.beta}, attr(), engine());
    // Forward: step 0 reads x, a second step updates y in place.
    append<dnnl::eltwise_forward>(forward_steps_, fwd[0], {{DNNL_ARG_SRC, x_}, {DNNL_ARG_DST, y_}}, false);
    if (steps.size() > 1)
      append<dnnl::eltwise_forward>(forward_steps_, fwd[1], {{DNNL_ARG_SRC, y_}, {DNNL_ARG_DST, y_}}, false);
    if (io) return;
    // Backward, last step first; each step reads its own input. A second step's input (the first
    // step's output) is recomputed into `between_`, and the gradient then flows in place in gx.
    auto bwd = [&](size_t k) {
      return dnnl::eltwise_backward::primitive_desc(
          {steps[k].algorithm, md, md, steps[k].alpha, steps[k].beta}, attr(), engine(), fwd[k]);
    };
    if (steps.size() > 1) {
      between_ = memory(md, engine());
      append<dnnl::eltwise_forward>(backward_steps_, fwd[0], {{DNNL_ARG_SRC, x_}, {DNNL_ARG_DST, between_}},
                                    true);
      append<dnnl::eltwise_backward>(
          backward_steps_, bwd(1),
          {{DNNL_ARG_SRC, between_}, {DNNL_ARG_DIFF_DST, gy_}, {DNNL_ARG_DIFF_SRC, gx_}}, true);
    }
    append<dnnl::eltwise_backward>(
        backward_steps_, bwd(0),
        {{DNNL_ARG_SRC, x_}, {DNNL_ARG_DIFF_DST, steps.size() > 1 ? gx_ : gy_}, {DNNL_ARG_DIFF_SRC, gx_}},
        true);
  }

  double flops() const override { return static_cast<double>(spec_.inputs[0].numel()); }

 protected:
  bool takes_layout(size_t i) const override { return i == 0; }
  std::unique_ptr<OnednnOp> variant(const IoLayouts& io) const override {
    return std::make_unique<EltwiseOp>(spec_, &io);
  }

 private:
  static std::vector<TensorDesc> outputs_of(const OpSpec& s) {
    D5_CHECK_ARG(!s.inputs.empty() && s.has_input(0), "{}: needs one input", s.label());
    refuse_if(s.inputs[0].numel() == 0, "empty tensor: nothing for oneDNN to compute");
    return {s.inputs[0]};
  }

  memory between_;
};

}  // namespace

void register_eltwise_ops(OpRegistry& r) {
  const std::pair<const char*, const char*> ops[] = {
      {"Relu", "eltwise_relu"},
      {"LeakyRelu", "eltwise_relu with alpha"},
      {"Sigmoid", "eltwise_logistic"},
      {"Tanh", "eltwise_tanh"},
      {"Elu", "eltwise_elu"},
      {"Selu", "eltwise_elu, then eltwise_linear (gamma)"},
      {"Gelu", "eltwise_gelu_erf / eltwise_gelu_tanh"},
      {"Softplus", "eltwise_soft_relu"},
      {"Mish", "eltwise_mish"},
      {"HardSigmoid", "eltwise_linear, then eltwise_clip_v2 to [0, 1]"},
      {"HardSwish", "eltwise_hardswish"},
      {"Sqrt", "eltwise_sqrt"},
      {"Exp", "eltwise_exp"},
      {"Log", "eltwise_log"},
      {"Abs", "eltwise_abs"},
      {"Neg", "eltwise_linear (-1)"},
      {"Reciprocal", "eltwise_pow (x^-1)"},
      {"Clip", "eltwise_clip_v2; min/max inputs must be constants known at creation"},
  };
  for (const auto& [type, how] : ops)
    add_op(
        r, type, true, [](const OpSpec& s) { return std::make_unique<EltwiseOp>(s); },
        fmt::format("{}; f32 only", how));
}

}  // namespace d5::onednn
