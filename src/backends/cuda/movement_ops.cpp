// Transpose, Slice, Expand and Pad on the backend's own kernels (movement_kernels.cu), and the
// registration of every family of movement, reduction, normalization and loss operators
// (register_movement_ops). Elements move as raw words, so every dtype runs forward; gradients
// are f32 only.
#include <algorithm>
#include <cstring>
#include <numeric>

#include "cuda_dims.h"
#include "deep500/spi/shape_rules.h"
#include "movement_kernels.h"

namespace d5::cuda {
inline namespace movement {

namespace {

// An op whose output reads input 0 through a strided map; backward is one of three shapes.
class MapOp : public CudaOp {
 public:
  enum class Back { Permute, Scatter, Fold };

  MapOp(const OpSpec& s, Back back) : CudaOp(s), back_(back), es_(static_cast<int>(dtype_size(s.inputs[0].dtype))) {
    if (s.inputs[0].dtype != DType::f32) forward_only("gradients are computed for f32 data only");
  }

  std::string implementation() const override { return "cuda"; }

  void forward(std::span<const Tensor> in, std::span<Tensor> out) override {
    check_inputs(in);
    strided_gather(in[0].data(), out[0].data(), out[0].numel(), map_, es_, nullptr);
    check_launch("strided_gather");
  }

  void backward(std::span<const Tensor> gy, std::span<const Tensor>, std::span<const Tensor>,
                std::span<Tensor> gx) override {
    Tensor& g = gx[0];
    if (!g.defined() || g.numel() == 0) return;
    if (!gy[0].defined()) return zero_tensor(g);
    switch (back_) {
      case Back::Permute:  // every input element is read exactly once: gather it back
        strided_gather(gy[0].data(), g.data(), g.numel(), back_map_, es_, nullptr);
        check_launch("strided_gather (backward)");
        break;
      case Back::Scatter:  // injective: elements not read get zero
        zero_tensor(g);
        strided_scatter_f32(fptr(gy[0]), fptr(g), gy[0].numel(), map_, op_stream());
        check_launch("strided_scatter_f32");
        break;
      case Back::Fold:
        run_sum(fptr(gy[0]), fptr(g), fold_);
        break;
    }
  }

 private:
  Back back_;
  int es_;

 public:
  // Filled in by the factory of each op: the forward map and what backward needs.
  StridedMap map_, back_map_;
  Reduction fold_;
};

std::unique_ptr<Operator> make_transpose(const OpSpec& s) {
  auto op = std::make_unique<MapOp>(s, MapOp::Back::Permute);
  const auto& in = s.inputs[0].shape.dims();
  const size_t r = in.size();
  std::vector<int64_t> perm(r);
  for (size_t i = 0; i < r; ++i) perm[i] = static_cast<int64_t>(r - 1 - i);
  perm = s.attrs.get_ints("perm", perm);
  const auto in_strides = row_strides(in);
  const auto out_strides = row_strides(op->output_descs()[0].shape.dims());
  std::vector<int64_t> out(r), strides(r), back_strides(r);
  for (size_t k = 0; k < r; ++k) {
    const auto a = static_cast<size_t>(perm[k]);
    out[k] = in[a];
    strides[k] = in_strides[a];
    back_strides[a] = out_strides[k];  // input axis a is output axis k
  }
  op->map_ = strided_map(out, strides);
  op->back_map_ = strided_map(in, back_strides);
  return op;
}

std::unique_ptr<Operator> make_slice(const OpSpec& s) {
  auto op = std::make_unique<MapOp>(s, MapOp::Back::Scatter);
  const auto& in = s.inputs[0].shape.dims();
  const auto starts = ints_input_or_attr(s, 1, "starts").value();
  const auto ends = ints_input_or_attr(s, 2, "ends").value();
  const size_t n = starts.size();
  std::vector<int64_t> axes(n), steps(n, 1);
  std::iota(axes.begin(), axes.end(), int64_t{0});
  axes = ints_input_or_attr(s, 3, "axes").value_or(axes);
  steps = ints_input_or_attr(s, 4, "steps").value_or(steps);
  const auto in_strides = row_strides(in);
  std::vector<int64_t> first(in.size(), 0), step(in.size(), 1);
  for (size_t i = 0; i < n; ++i) {
    const size_t a = axis_index(axes[i], in.size());
    const int64_t d = in[a];
    // The same clamping as the reference; counts come from the oracle's output shape.
    const int64_t st = std::clamp(steps[i], -INT64_MAX, INT64_MAX);
    int64_t b = starts[i] < 0 ? starts[i] + d : starts[i];
    b = st > 0 ? std::clamp(b, int64_t{0}, d) : std::clamp(b, int64_t{0}, std::max<int64_t>(d - 1, 0));
    first[a] = b;
    step[a] = st;
  }
  const auto& out = op->output_descs()[0].shape.dims();
  std::vector<int64_t> strides(in.size());
  int64_t base = 0;
  for (size_t a = 0; a < in.size(); ++a) {
    // A step beyond the extent selects at most one element: its stride never gets used.
    strides[a] = out[a] > 1 ? step[a] * in_strides[a] : in_strides[a];
    if (out[a] > 0) base += first[a] * in_strides[a];
  }
  op->map_ = strided_map(out, strides, base);
  return op;
}

std::unique_ptr<Operator> make_expand(const OpSpec& s) {
  auto op = std::make_unique<MapOp>(s, MapOp::Back::Fold);
  const Shape& in = s.inputs[0].shape;
  const Shape& out = op->output_descs()[0].shape;
  op->map_ = broadcast_map(in, out);
  op->fold_ = fold_to(out, in);
  return op;
}

// ---- Pad ----------------------------------------------------------------------------------

class PadOp : public CudaOp {
 public:
  explicit PadOp(const OpSpec& s) : CudaOp(s), es_(static_cast<int>(dtype_size(s.inputs[0].dtype))) {
    if (s.inputs[0].dtype != DType::f32) forward_only("gradients are computed for f32 data only");
    const std::string name = s.attrs.get_string("mode", "constant");
    const PadMode mode = parse_pad_mode(s, name);
    const auto& in = s.inputs[0].shape.dims();
    const size_t r = in.size();
    const auto pads = ints_input_or_attr(s, 1, "pads").value();
    std::vector<int64_t> all(r);
    std::iota(all.begin(), all.end(), int64_t{0});
    const auto axes = ints_input_or_attr(s, 3, "axes").value_or(all);
    std::vector<int64_t> begin(r, 0);
    for (size_t i = 0; i < axes.size(); ++i) begin[axis_index(axes[i], r)] = pads[i];
    const auto& out = outputs_[0].shape.dims();
    build_tables(in, out, begin, mode);
    // Before opset 11 the fill is the FLOAT attribute 'value', converted to the data's dtype.
    Tensor v(s.inputs[0].dtype, Shape{});
    v.set(0, s.attrs.get_float("value", 0.0));
    std::memcpy(&fill_bits_, v.data(), v.bytes());
  }

  std::string implementation() const override { return "cuda"; }

  void forward(std::span<const Tensor> in, std::span<Tensor> out) override {
    check_inputs(in);
    const void* fill = spec_.has_input(2) ? in[2].data() : nullptr;
    pad_forward(in[0].data(), out[0].data(), out[0].numel(), map_, tables_.as<int64_t>(), fill, fill_bits_, es_, op_stream());
    check_launch("pad_forward");
  }

  void backward(std::span<const Tensor> gy, std::span<const Tensor>, std::span<const Tensor>,
                std::span<Tensor> gx) override {
    Tensor& g = gx[0];
    if (!g.defined() || g.numel() == 0) return;
    if (!gy[0].defined()) return zero_tensor(g);
    pad_backward_f32(fptr(gy[0]), fptr(g), g.numel(), grad_map_, ptrs_.as<int64_t>(), lists_.as<int64_t>(), op_stream());
    check_launch("pad_backward_f32");
  }

 private:
  // Per axis: the source of each output coordinate (forward) and, inverted, the output
  // coordinates reading each input coordinate in ascending order (backward).
  void build_tables(const std::vector<int64_t>& in, const std::vector<int64_t>& out,
                    const std::vector<int64_t>& begin, PadMode mode) {
    const size_t r = in.size();
    refuse_if(r > static_cast<size_t>(kMaxRank), "rank {} is above the {} axes these kernels index", r, kMaxRank);
    const auto in_strides = row_strides(in), out_strides = row_strides(out);
    std::vector<int64_t> tables, ptrs, lists;
    map_.rank = grad_map_.rank = static_cast<int>(r);
    for (size_t k = 0; k < r; ++k) {
      map_.out_dims[k] = out[k];
      map_.in_strides[k] = in_strides[k];
      map_.table_off[k] = static_cast<int64_t>(tables.size());
      std::vector<std::vector<int64_t>> readers(static_cast<size_t>(in[k]));
      for (int64_t c = 0; c < out[k]; ++c) {
        const int64_t src = in[k] > 0 ? pad_source(c - begin[k], in[k], mode) : kPadOutside;
        tables.push_back(src);
        if (src >= 0) readers[static_cast<size_t>(src)].push_back(c);
      }
      grad_map_.in_dims[k] = in[k];
      grad_map_.out_strides[k] = out_strides[k];
      grad_map_.ptr_off[k] = static_cast<int64_t>(ptrs.size());
      for (const auto& rd : readers) {
        ptrs.push_back(static_cast<int64_t>(lists.size()));
        lists.insert(lists.end(), rd.begin(), rd.end());
      }
      ptrs.push_back(static_cast<int64_t>(lists.size()));
    }
    tables_ = upload(tables);
    ptrs_ = upload(ptrs);
    lists_ = upload(lists);
  }

  int es_;
  uint64_t fill_bits_ = 0;
  PadMap map_;
  PadGradMap grad_map_;
  DeviceBuffer tables_, ptrs_, lists_;
};

}  // namespace

}  // inline namespace movement

void register_movement_ops(OpRegistry& r) {
  const char* moves = "moves raw elements, so every dtype runs forward; gradients for f32";
  add_op(r, "Transpose", make_transpose, {.backward = true, .any_dtype = true, .notes = moves});
  add_op(r, "Slice", make_slice,
         {.backward = true, .any_dtype = true,
          .notes = "starts, ends, axes and steps must be known at creation; " + std::string(moves)});
  add_op(r, "Expand", make_expand,
         {.backward = true, .any_dtype = true,
          .notes = "shape must be known at creation; " + std::string(moves)});
  add_op(
      r, "Pad", [](const OpSpec& s) -> std::unique_ptr<Operator> { return std::make_unique<PadOp>(s); },
      {.backward = true, .any_dtype = true,
       .notes = "constant, reflect, edge and wrap; pads and axes must be known at creation; " + std::string(moves)});
  register_block_ops(r);
  register_reduce_ops(r);
  register_layer_norm_op(r);
  register_loss_ops(r);
}

}  // namespace d5::cuda
