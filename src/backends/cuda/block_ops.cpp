// Concat, Split, Gather and Where on the backend's own kernels (movement_kernels.cu). Elements
// move as raw words, so every dtype runs forward; gradients are f32 only. Gather reads its
// indices on the device and, like the reference, rejects an out-of-range one: the one place
// where an operator waits for the device (to read the kernel's flag).
#include "cuda_dims.h"
#include "movement_kernels.h"

namespace d5::cuda {
inline namespace movement {

namespace {

// A tensor viewed as [outer, extent, inner] around `axis`.
struct AxisView {
  int64_t outer = 1, inner = 1;
  AxisView(const Shape& s, size_t axis) {
    for (size_t k = 0; k < axis; ++k) outer *= s[k];
    for (size_t k = axis + 1; k < s.rank(); ++k) inner *= s[k];
  }
};

// Concat (parts are inputs) and Split (parts are outputs): blocks of rows side by side.
class BlockOp : public CudaOp {
 public:
  BlockOp(const OpSpec& s, bool concat) : CudaOp(s), concat_(concat) {
    if (s.inputs[0].dtype != DType::f32) forward_only("gradients are computed for f32 data only");
    es_ = static_cast<int>(dtype_size(s.inputs[0].dtype));
    const Shape& whole = concat ? outputs_[0].shape : s.inputs[0].shape;
    const size_t axis = axis_index(s.attrs.get_int("axis", 0), whole.rank());
    const AxisView v(whole, axis);
    outer_ = v.outer;
    whole_row_ = whole[axis] * v.inner;
    int64_t at = 0;
    const size_t parts = concat ? s.inputs.size() : outputs_.size();
    for (size_t i = 0; i < parts; ++i) {
      const int64_t e = (concat ? s.inputs[i].shape : outputs_[i].shape)[axis];
      rows_.push_back(e * v.inner);
      offsets_.push_back(at * v.inner);
      at += e;
    }
  }

  std::string implementation() const override { return "cuda"; }

  void forward(std::span<const Tensor> in, std::span<Tensor> out) override {
    check_inputs(in);
    if (concat_)
      gather_parts(in, out[0]);
    else
      split_whole(in[0], out);
  }

  void backward(std::span<const Tensor> gy, std::span<const Tensor>, std::span<const Tensor>,
                std::span<Tensor> gx) override {
    if (concat_) {
      if (gy[0].defined())
        split_whole(gy[0], gx);
      else
        for (auto& g : gx) zero_tensor(g);
    } else if (gx[0].defined()) {
      gather_parts(gy, gx[0]);
    }
  }

 private:
  // whole = the parts side by side; an undefined part (an absent gradient) gives zeros.
  void gather_parts(std::span<const Tensor> parts, Tensor& whole) {
    bool all = true;
    for (const auto& p : parts) all = all && p.defined();
    if (!all) zero_tensor(whole);
    for (size_t i = 0; i < rows_.size(); ++i) {
      if (!parts[i].defined()) continue;
      copy_rows(parts[i].data(), whole.data(), outer_, rows_[i], rows_[i], 0, whole_row_, offsets_[i], es_, op_stream());
      check_launch("copy_rows");
    }
  }
  void split_whole(const Tensor& whole, std::span<Tensor> parts) {
    for (size_t i = 0; i < rows_.size(); ++i) {
      if (!parts[i].defined() || parts[i].numel() == 0) continue;  // gradients nobody needs
      copy_rows(whole.data(), parts[i].data(), outer_, rows_[i], whole_row_, offsets_[i], rows_[i], 0, es_, op_stream());
      check_launch("copy_rows");
    }
  }

  bool concat_;
  int es_ = 4;
  int64_t outer_ = 1, whole_row_ = 0;
  std::vector<int64_t> rows_, offsets_;
};

class GatherOp : public CudaOp {
 public:
  explicit GatherOp(const OpSpec& s) : CudaOp(s) {
    if (s.inputs[0].dtype != DType::f32) forward_only("gradients are computed for f32 data only");
    const Shape& data = s.inputs[0].shape;
    refuse_if(s.inputs[1].dtype != DType::i64 && s.inputs[1].dtype != DType::i32,
              "indices must be int64 or int32, got {}", to_string(s.inputs[1].dtype));
    const size_t axis = axis_index(s.attrs.get_int("axis", 0), data.rank());
    const AxisView v(data, axis);
    outer_ = v.outer;
    inner_ = v.inner;
    extent_ = data[axis];
    n_ = s.inputs[1].numel();
    is64_ = s.inputs[1].dtype == DType::i64;
    es_ = static_cast<int>(dtype_size(s.inputs[0].dtype));
    const auto words = [](int64_t k) { return static_cast<size_t>(k) * sizeof(int64_t); };
    norm_ = DeviceBuffer(words(n_));
    if (!sem_.differentiable.empty()) {
      order_ = DeviceBuffer(words(n_));
      counts_ = DeviceBuffer(words(extent_ + 1));
      first_ = DeviceBuffer(words(extent_ + 1));
    }
  }

  std::string implementation() const override { return "cuda"; }

  void forward(std::span<const Tensor> in, std::span<Tensor> out) override {
    check_inputs(in);
    check_indices(in[1]);
    gather_rows(in[0].data(), out[0].data(), norm_.as<int64_t>(), outer_, n_, extent_, inner_, es_, op_stream());
    check_launch("gather_rows");
    check_on_host([this, indices = in[1].data()] {
      if (const auto bad = flag_.read())
        D5_THROW(InvalidArgument, "{}: index {} (position {}) is out of range for an axis of extent {}",
                 spec_.label(), read_index(indices, is64_, *bad), *bad, extent_);
    });
  }

  // Repeated indices read one row several times: their gradients add up, in index order.
  void backward(std::span<const Tensor> gy, std::span<const Tensor> in, std::span<const Tensor>,
                std::span<Tensor> gx) override {
    if (!gx[0].defined() || gx[0].numel() == 0) return;
    if (!gy[0].defined()) return zero_tensor(gx[0]);
    check_indices(in[1]);  // forward has already rejected bad ones
    gather_sort_indices(norm_.as<int64_t>(), n_, extent_, counts_.as<int64_t>(), first_.as<int64_t>(),
                        order_.as<int64_t>(), op_stream());
    check_launch("gather_sort_indices");
    gather_backward_f32(fptr(gy[0]), fptr(gx[0]), order_.as<int64_t>(), first_.as<int64_t>(), outer_, n_, extent_,
                        inner_, op_stream());
    check_launch("gather_backward_f32");
  }

 private:
  void check_indices(const Tensor& indices) {
    unsigned long long* bad = flag_.reset();
    gather_check_indices(indices.data(), is64_, n_, extent_, norm_.as<int64_t>(), bad, nullptr);
    check_launch("gather_check_indices");
  }

  int64_t outer_ = 1, inner_ = 1, extent_ = 0, n_ = 0;
  bool is64_ = true;
  int es_ = 4;
  DeviceBuffer norm_, order_, counts_, first_;
  FirstBad flag_;
};

class WhereOp : public CudaOp {
 public:
  explicit WhereOp(const OpSpec& s) : CudaOp(s) {
    refuse_if(s.inputs[0].dtype != DType::boolean, "the condition must be bool, got {}", to_string(s.inputs[0].dtype));
    const Shape& out = outputs_[0].shape;
    for (size_t k = 0; k < 3; ++k) maps_[k] = broadcast_map(s.inputs[k].shape, out);
    es_ = static_cast<int>(dtype_size(s.inputs[1].dtype));
    if (s.inputs[1].dtype != DType::f32) {
      forward_only("gradients are computed for f32 data only");
      return;
    }
    full_ = DeviceBuffer(static_cast<size_t>(out.numel()) * sizeof(float));
    folds_[0] = fold_to(out, s.inputs[1].shape);
    folds_[1] = fold_to(out, s.inputs[2].shape);
  }

  std::string implementation() const override { return "cuda"; }

  void forward(std::span<const Tensor> in, std::span<Tensor> out) override {
    check_inputs(in);
    where_forward(static_cast<const unsigned char*>(in[0].data()), in[1].data(), in[2].data(), out[0].data(),
                  out[0].numel(), maps_[0], maps_[1], maps_[2], es_, op_stream());
    check_launch("where_forward");
  }

  void backward(std::span<const Tensor> gy, std::span<const Tensor> in, std::span<const Tensor>,
                std::span<Tensor> gx) override {
    for (size_t k = 1; k < 3 && k < gx.size(); ++k) {
      if (!gx[k].defined() || gx[k].numel() == 0) continue;
      if (!gy[0].defined()) {
        zero_tensor(gx[k]);
        continue;
      }
      where_mask_f32(static_cast<const unsigned char*>(in[0].data()), fptr(gy[0]), full_.as<float>(),
                     gy[0].numel(), maps_[0], k == 1, nullptr);
      check_launch("where_mask_f32");
      run_sum(full_.as<float>(), fptr(gx[k]), folds_[k - 1]);
    }
  }

 private:
  StridedMap maps_[3];
  int es_ = 4;
  DeviceBuffer full_;
  Reduction folds_[2];
};

template <typename Op, typename... A>
Maker maker(A... args) {
  return [=](const OpSpec& s) -> std::unique_ptr<Operator> { return std::make_unique<Op>(s, args...); };
}

}  // namespace

void register_block_ops(OpRegistry& r) {
  const std::string moves = "moves raw elements, so every dtype runs forward; gradients for f32";
  add_op(r, "Concat", maker<BlockOp>(true), {.backward = true, .any_dtype = true, .notes = moves});
  add_op(r, "Split", maker<BlockOp>(false),
         {.backward = true, .any_dtype = true, .notes = "part sizes from the oracle's outputs; " + moves});
  add_op(r, "Gather", maker<GatherOp>(),
         {.backward = true, .any_dtype = true,
          .notes = "int64/int32 indices read on the device; an out-of-range index waits for the device to "
                   "report it; " + moves});
  add_op(r, "Where", maker<WhereOp>(),
         {.backward = true, .any_dtype = true, .notes = "bool condition, broadcasting; " + moves});
}

}  // inline namespace movement
}  // namespace d5::cuda
