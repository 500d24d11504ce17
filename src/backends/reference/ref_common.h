#pragma once
// Shared pieces of the reference backend: the operator base class, dtype dispatch, broadcasting
// and registration. Reference kernels favour clarity; they compute in the input dtype (f32 or
// f64; integer types where ONNX allows them) and accumulate reductions in double.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "deep500/core/error.h"
#include "deep500/op/op_registry.h"
#include "deep500/op/operator.h"
#include "deep500/spi/shape_rules.h"  // broadcasting, axes, windows: shared with every backend

namespace d5::reference {

class ReferenceOp : public Operator {
 public:
  std::string implementation() const override { return "reference"; }

 protected:
  using Operator::Operator;
};

[[noreturn]] void throw_unsupported_dtype(DType t, const OpSpec& spec, std::initializer_list<std::string_view> ok);

// Calls f.template operator()<T>() for the C++ type of `t`, if T is among Ts; otherwise throws
// InvalidArgument naming the op and the dtypes it supports.
template <typename... Ts, typename F>
auto dispatch(DType t, const OpSpec& spec, F&& f) {
  using R = decltype(f.template operator()<std::tuple_element_t<0, std::tuple<Ts...>>>());
  if constexpr (std::is_void_v<R>) {
    bool done = ((t == dtype_of_v<Ts> ? (f.template operator()<Ts>(), true) : false) || ...);
    if (!done) throw_unsupported_dtype(t, spec, {to_string(dtype_of_v<Ts>)...});
  } else {
    R r{};
    bool done = ((t == dtype_of_v<Ts> ? (r = f.template operator()<Ts>(), true) : false) || ...);
    if (!done) throw_unsupported_dtype(t, spec, {to_string(dtype_of_v<Ts>)...});
    return r;
  }
}

template <typename F> auto dispatch_float(DType t, const OpSpec& spec, F&& f) {
  return dispatch<float, double>(t, spec, std::forward<F>(f));
}
template <typename F> auto dispatch_numeric(DType t, const OpSpec& spec, F&& f) {
  return dispatch<float, double, int32_t, int64_t, int8_t, int16_t, uint8_t>(t, spec, std::forward<F>(f));
}

// Maps each flat index of the broadcast output to the flat index of one input.
class BroadcastMap {
 public:
  BroadcastMap(const Shape& input, const Shape& output);
  // Visits all output positions in order, calling f(out_index, in_index).
  template <typename F> void for_each(F&& f) const {
    const size_t r = out_dims_.size();
    const int64_t n = numel_;
    if (r == 0) {
      if (n) f(int64_t{0}, int64_t{0});
      return;
    }
    std::vector<int64_t> idx(r, 0);
    int64_t in = 0;
    for (int64_t o = 0; o < n; ++o) {
      f(o, in);
      for (size_t d = r; d-- > 0;) {
        in += in_strides_[d];
        if (++idx[d] < out_dims_[d]) break;
        in -= in_strides_[d] * out_dims_[d];
        idx[d] = 0;
      }
    }
  }
  bool identity() const { return identity_; }

 private:
  std::vector<int64_t> out_dims_, in_strides_;  // stride 0 on broadcast axes
  int64_t numel_ = 0;
  bool identity_ = false;
};

// Sums a gradient of the broadcast output shape back to an input's shape.
void reduce_to_shape(const Tensor& grad_out, Tensor& grad_in);

// Registers a reference implementation of `op_type`.
void add_op(OpRegistry& r, const std::string& op_type, bool backward, OpFactory f);

// Helper for factories: builds Op(spec) and returns it as an OpCreateResult.
template <typename Op> OpCreateResult make(const OpSpec& spec) { return std::make_unique<Op>(spec); }

// Registers the reference backend and all its operators in the global registries (idempotent).
// Programs that need only the reference backend call this instead of linking every backend.
void register_all();

// Registration functions, one per op family (each in its own file under ops/).
void register_unary_ops(OpRegistry& r);
void register_normalization_ops(OpRegistry& r);  // Batch/Instance/LayerNormalization, LRN
void register_softmax_ops(OpRegistry& r);
void register_reduce_ops(OpRegistry& r);
void register_loss_ops(OpRegistry& r);
void register_binary_ops(OpRegistry& r);     // Add Sub Mul Div Pow
void register_variadic_ops(OpRegistry& r);   // Sum Mean Max Min
void register_logic_ops(OpRegistry& r);      // Equal Less Greater ...OrEqual And Or Xor Not
void register_selection_ops(OpRegistry& r);  // Where ArgMax ArgMin
void register_shape_ops(OpRegistry& r);  // Reshape Flatten Squeeze Unsqueeze Identity Shape Constant
void register_data_movement_ops(OpRegistry& r);  // Transpose Slice Pad Expand Concat Split Gather
void register_cast_dropout_ops(OpRegistry& r);
void register_rnn_ops(OpRegistry& r);  // RNN, GRU, LSTM
void register_nn_ops(OpRegistry& r);  // Conv, ConvTranspose, Gemm, MatMul, pooling
void register_cumsum_ops(OpRegistry& r);
void register_einsum_ops(OpRegistry& r);
void register_elements_indexing_ops(OpRegistry& r);  // GatherElements ScatterElements
void register_topk_ops(OpRegistry& r);
void register_trilu_ops(OpRegistry& r);
void register_resize_ops(OpRegistry& r);
void register_roi_align_ops(OpRegistry& r);
void register_non_max_suppression_ops(OpRegistry& r);
void register_range_ops(OpRegistry& r);
void register_dft_ops(OpRegistry& r);  // DFT STFT
void register_mel_weight_matrix_ops(OpRegistry& r);
void register_ctc_loss_ops(OpRegistry& r);
void register_ssd_loss_ops(OpRegistry& r);

}  // namespace d5::reference
