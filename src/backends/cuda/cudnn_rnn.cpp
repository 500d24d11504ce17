// LSTM, GRU and RNN on cuDNN's RNN API (cudnnRNNForward, cudnnRNNBackwardData_v8,
// cudnnRNNBackwardWeights_v8), forward and backward, f32; one layer, as the ONNX operators.
//
// Semantics are the reference's (backends/reference/ops/recurrent.h), mapped onto cuDNN as follows:
// - Weights. cuDNN keeps every gate's matrix and bias in one packed weight space; their places come
//   from cudnnGetRNNWeightParams at creation, and every forward copies W, R and B there (an absent B
//   leaves the biases zero). Each gate's matrix is [hidden, in] row-major, as one gate's block of
//   ONNX's W and R. Gate orders differ: ONNX LSTM stacks i, o, f, c where cuDNN numbers its linear
//   layers i, f, c, o (0..3 on the input, 4..7 on the recurrent state); ONNX GRU stacks z, r, h
//   where cuDNN numbers r, z, h (0..2, 3..5). Both biases are kept (CUDNN_RNN_DOUBLE_BIAS). The
//   weight gradients come back in the same packed layout and are unpacked the same way.
// - GRU: cuDNN applies the reset gate after the recurrent product, ONNX's linear_before_reset=1;
//   linear_before_reset=0 is refused.
// - Data: X stays as it is, layout=0 as CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_UNPACKED ([seq, batch,
//   input]), layout=1 as BATCH_MAJOR_UNPACKED ([batch, seq, input]). cuDNN's Y is [seq, batch,
//   directions * hidden] (or [batch, seq, ...]): the same as ONNX's Y except for layout=0 and two
//   directions (ONNX [seq, directions, batch, hidden]), where it is transposed; the states are
//   cuDNN's [directions, batch, hidden], as ONNX layout=0, and transposed for layout=1 with two
//   directions. cuDNN's Y is kept in an own buffer, since backward needs it.
// - direction=reverse: cuDNN has no reverse-only mode, so each sequence is reversed within its
//   length (own kernel) before a forward pass and its outputs reversed back; the same for the
//   gradients.
// - sequence_lens: read back to the host at every forward (the data descriptors need the lengths)
//   and checked as the reference does. Positions past a sequence's end are zero in Y (cuDNN's
//   padding fill) and in dX. cuDNN fails on empty sequences, so an empty one runs with length 1
//   and its results are masked, as the reference has them: zero Y and Y_h / Y_c, and zero
//   upstream gradients for that one step, which makes every gradient it contributes exactly zero.
// - Training vs inference: the Operator interface does not say whether backward will follow, so
//   every forward runs in CUDNN_FWD_MODE_TRAINING and keeps the reserve space backward needs.
// - Refused: peepholes (P given), input_forget=1, clip (cuDNN's cudnnRNNSetClip_v8 clips the LSTM
//   cell state, ONNX clips the input of every activation), activations other than cuDNN's (LSTM
//   Sigmoid, Tanh, Tanh; GRU Sigmoid, Tanh; RNN Tanh or Relu, the same in both directions).
//
// Strict f32 math asks cuDNN for FMA kernels only (no TF32); d5 --math tf32 lets it use tensor
// cores.
#include <algorithm>
#include <array>
#include <cctype>
#include <string_view>

#include <fmt/ranges.h>

#include "cudnn_common.h"
#include "rnn_kernels.h"

// See cudnn_common.h: the legacy API is deprecated in cuDNN 9 and used here on purpose.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

namespace d5::cuda {

namespace {

using CudnnRnn = CudnnDescriptor<cudnnRNNDescriptor_t, cudnnCreateRNNDescriptor, cudnnDestroyRNNDescriptor>;
using CudnnRnnData =
    CudnnDescriptor<cudnnRNNDataDescriptor_t, cudnnCreateRNNDataDescriptor, cudnnDestroyRNNDataDescriptor>;
using CudnnDropout =
    CudnnDescriptor<cudnnDropoutDescriptor_t, cudnnCreateDropoutDescriptor, cudnnDestroyDropoutDescriptor>;

bool same_name(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

// One operator type: its gates, and cuDNN's linear-layer id of each ONNX gate (the input-side id;
// the recurrent side is gates + id).
struct CellKind {
  int64_t gates;
  std::array<int, 4> cudnn_gate;
  std::vector<std::string> activations;  // cuDNN's, per direction ("" for RNN: Tanh or Relu)
};

const CellKind kLstm{4, {0, 3, 1, 2}, {"Sigmoid", "Tanh", "Tanh"}};  // ONNX i, o, f, c -> cuDNN i, f, c, o
const CellKind kGru{3, {1, 0, 2, 0}, {"Sigmoid", "Tanh"}};           // ONNX z, r, h -> cuDNN r, z, h
const CellKind kRnn{1, {0, 0, 0, 0}, {}};

const CellKind& kind_of(const std::string& type) {
  if (type == "LSTM") return kLstm;
  if (type == "GRU") return kGru;
  return kRnn;
}

class CudnnRnnOp final : public CudaOp {
 public:
  explicit CudnnRnnOp(const OpSpec& s) : CudaOp(s), kind_(kind_of(s.type)) {
    lstm_ = s.type == "LSTM";
    const auto& in = s.inputs;
    for (const size_t i : std::array<size_t, 6>{0, 1, 2, 3, 5, 6})
      if (s.has_input(i))
        refuse_if(in[i].dtype != DType::f32, "input {} is {}: the cuDNN recurrent operators run f32 only", i,
                  to_string(in[i].dtype));
    refuse_if(lstm_ && s.has_input(7), "P (peepholes) is given: cuDNN's LSTM has no peephole connections");
    refuse_if(lstm_ && s.attrs.get_int("input_forget", 0) != 0,
              "input_forget=1: cuDNN's LSTM has no coupled input and forget gates");
    refuse_if(s.attrs.has("clip"),
              "clip={}: cuDNN clips the LSTM cell state (cudnnRNNSetClip_v8), ONNX the input of every activation",
              s.attrs.get_float("clip", 0.0));
    refuse_if(s.type == "GRU" && s.attrs.get_int("linear_before_reset", 0) == 0,
              "linear_before_reset=0: cuDNN's GRU applies the reset gate after the recurrent product "
              "(linear_before_reset=1) only");

    batch_major_ = s.attrs.get_int("layout", 0) == 1;
    const std::string direction = s.attrs.get_string("direction", "forward");
    dirs_ = direction == "bidirectional" ? 2 : 1;
    reverse_ = direction == "reverse";
    const Shape& x = in[0].shape;
    seq_ = x[batch_major_ ? 1 : 0];
    batch_ = x[batch_major_ ? 0 : 1];
    input_ = x[2];
    hidden_ = in[2].shape[2];
    refuse_if(seq_ == 0 || batch_ == 0 || input_ == 0 || hidden_ == 0,
              "X {} / hidden size {}: cuDNN takes no empty sequences, batches or vectors", x.to_string(), hidden_);
    for (const size_t i : std::array<size_t, 3>{0, 1, 2})
      refuse_beyond_int(in[i].shape, i == 0 ? "X" : i == 1 ? "W" : "R");
    refuse_beyond_int(sem_.outputs[0].shape, "Y");
    has_bias_ = s.has_input(3);
    has_lens_ = s.has_input(4);
    lens64_ = has_lens_ && in[4].dtype == DType::i64;
    has_h0_ = s.has_input(5);
    has_c0_ = lstm_ && s.has_input(6);

    const cudnnRNNMode_t mode = rnn_mode(s);
    const cudnnHandle_t h = cudnn_handle();
    check_cudnn(cudnnSetDropoutDescriptor(dropout_.get(), h, 0.0f, nullptr, 0, 0), "cudnnSetDropoutDescriptor");
    tf32_ = allow_tf32();
    auto set_rnn = [&](cudnnMathType_t math) {
      return cudnnSetRNNDescriptor_v8(rnn_.get(), CUDNN_RNN_ALGO_STANDARD, mode, CUDNN_RNN_DOUBLE_BIAS,
                                      dirs_ == 2 ? CUDNN_BIDIRECTIONAL : CUDNN_UNIDIRECTIONAL, CUDNN_LINEAR_INPUT,
                                      CUDNN_DATA_FLOAT, CUDNN_DATA_FLOAT, math, static_cast<int32_t>(input_),
                                      static_cast<int32_t>(hidden_), static_cast<int32_t>(hidden_), 1,
                                      dropout_.get(), CUDNN_RNN_PADDED_IO_ENABLED);
    };
    if (tf32_) {
      check_cudnn(set_rnn(CUDNN_DEFAULT_MATH), "cudnnSetRNNDescriptor_v8");
    } else if (set_rnn(CUDNN_FMA_MATH) != CUDNN_STATUS_SUCCESS) {
      // Should cuDNN not take FMA-only math for RNNs, its default (which may use TF32 on Ampere
      // and later) is used, and the implementation name says so.
      check_cudnn(set_rnn(CUDNN_DEFAULT_MATH), "cudnnSetRNNDescriptor_v8");
      default_math_ = true;
    }

    // States: [directions, batch, hidden], packed.
    const std::array<int, 3> state_dims = {static_cast<int>(dirs_), static_cast<int>(batch_),
                                           static_cast<int>(hidden_)};
    const std::array<int, 3> state_strides = {static_cast<int>(batch_ * hidden_), static_cast<int>(hidden_), 1};
    check_cudnn(cudnnSetTensorNdDescriptor(state_.get(), CUDNN_DATA_FLOAT, 3, state_dims.data(), state_strides.data()),
                "cudnnSetTensorNdDescriptor");

    lens_host_.assign(static_cast<size_t>(batch_), static_cast<int32_t>(seq_));
    lens_dev_ = DeviceBuffer(static_cast<size_t>(batch_) * sizeof(int32_t));
    apply_lengths();

    check_cudnn(cudnnGetRNNWeightSpaceSize(h, rnn_.get(), &weight_bytes_), "cudnnGetRNNWeightSpaceSize");
    w_ = DeviceBuffer(weight_bytes_);
    dw_ = DeviceBuffer(weight_bytes_);
    // Biases stay zero without B; cuDNN's padding between blocks, if any, is zero too.
    check_cuda(cudaMemsetAsync(w_.get(), 0, weight_bytes_, op_stream()), "cudaMemsetAsync");
    locate_weights();
    ybuf_ = DeviceBuffer(static_cast<size_t>(y_elems()) * sizeof(float));
  }

  std::string implementation() const override {
    const char* cell = lstm_ ? "lstm" : kind_.gates == 3 ? "gru" : "rnn";
    return fmt::format("cuda:cudnn:{}{}", cell, tf32_ ? "(tf32)" : default_math_ ? "(default math)" : "");
  }

  int64_t workspace_bytes() const override { return static_cast<int64_t>(ws_.bytes() + rs_.bytes()); }

  void forward(std::span<const Tensor> in, std::span<Tensor> out) override {
    check_inputs(in);
    ran_forward_ = false;
    if (has_lens_) read_lengths(in[4]);
    pack_weights(in);
    const Prepared p = prepare(in);
    float* y = ybuf_.as<float>();
    const bool swap_states = states_transposed();
    float* out_hy = output(out, 1);
    float* out_cy = lstm_ ? output(out, 2) : nullptr;
    float* hy = out_hy && swap_states ? ensure(hybuf_, state_elems()) : out_hy;
    float* cy = out_cy && swap_states ? ensure(cybuf_, state_elems()) : out_cy;
    check_cudnn(cudnnRNNForward(cudnn_handle(), rnn_.get(), CUDNN_FWD_MODE_TRAINING, lens_dev_.as<int32_t>(),
                                x_desc_.get(), p.x, y_desc_.get(), y, state_.get(), p.hx, hy, state_.get(), p.cx, cy,
                                weight_bytes_, w_.get(), ws_.bytes(), ws_.get(), rs_.bytes(), rs_.get()),
                "cudnnRNNForward");
    // Empty sequences ran one step: their outputs are zero, as the reference's.
    zero_step_rows(y);
    zero_state_rows(hy);
    zero_state_rows(cy);
    if (float* out_y = output(out, 0)) {
      if (reverse_)
        rnn_kernels::reverse_sequences(y, out_y, lens_dev_.as<int32_t>(), seq_, batch_, hidden_, batch_major_,
                                       nullptr);
      else if (y_transposed())
        rnn_kernels::swap_middle_axes(y, out_y, seq_, batch_, dirs_, hidden_, op_stream());  // -> [S, D, N, H]
      else
        copy_device(out_y, y, static_cast<size_t>(y_elems()) * sizeof(float));
      check_launch("rnn output");
    }
    if (swap_states) {
      if (out_hy) rnn_kernels::swap_middle_axes(hy, out_hy, 1, dirs_, batch_, hidden_, op_stream());  // -> [N, D, H]
      if (out_cy) rnn_kernels::swap_middle_axes(cy, out_cy, 1, dirs_, batch_, hidden_, op_stream());
      check_launch("swap_middle_axes");
    }
    ran_forward_ = true;
  }

  void backward(std::span<const Tensor> gy, std::span<const Tensor> in, std::span<const Tensor>,
                std::span<Tensor> gx) override {
    check_inputs(in);
    D5_CHECK(ran_forward_, InvalidArgument, "{}: backward called before forward", spec_.label());
    const float* g_y = grad(gy, 0);
    const float* g_yh = grad(gy, 1);
    const float* g_yc = lstm_ ? grad(gy, 2) : nullptr;
    if (!g_y && !g_yh && !g_yc) return zero_gradients(gx);
    const Prepared p = prepare(in);
    const cudnnHandle_t h = cudnn_handle();

    // dY in cuDNN's layout; zeros where no gradient arrives.
    const float* dy = g_y;
    if (!g_y || reverse_ || y_transposed() || !empty_.empty()) {
      float* buf = ensure(dybuf_, y_elems());
      if (!g_y)
        check_cuda(cudaMemsetAsync(buf, 0, static_cast<size_t>(y_elems()) * sizeof(float), op_stream()),
                   "cudaMemsetAsync");
      else if (reverse_)
        rnn_kernels::reverse_sequences(g_y, buf, lens_dev_.as<int32_t>(), seq_, batch_, hidden_, batch_major_,
                                       nullptr);
      else if (y_transposed())
        rnn_kernels::swap_middle_axes(g_y, buf, seq_, dirs_, batch_, hidden_, op_stream());  // -> [S, N, D, H]
      else
        copy_device(buf, g_y, static_cast<size_t>(y_elems()) * sizeof(float));
      check_launch("rnn upstream gradient");
      zero_step_rows(buf);
      dy = buf;
    }
    const float* dhy = upstream_state(g_yh, dhybuf_);
    const float* dcy = upstream_state(g_yc, dcybuf_);

    float* g_x = grad(gx, 0);
    float* dx = g_x && !reverse_ ? g_x : ensure(dxbuf_, x_elems());
    // Positions past a sequence's end get no gradient (the reversal writes zeros there itself).
    if (varlen_ && !reverse_)
      check_cuda(cudaMemsetAsync(dx, 0, static_cast<size_t>(x_elems()) * sizeof(float), op_stream()), "cudaMemsetAsync");
    const bool swap_states = states_transposed();
    float* g_h0 = has_h0_ ? grad(gx, 5) : nullptr;
    float* g_c0 = has_c0_ ? grad(gx, 6) : nullptr;
    float* dhx = g_h0 && swap_states ? ensure(dhxbuf_, state_elems()) : g_h0;
    float* dcx = g_c0 && swap_states ? ensure(dcxbuf_, state_elems()) : g_c0;
    check_cudnn(cudnnRNNBackwardData_v8(h, rnn_.get(), lens_dev_.as<int32_t>(), y_desc_.get(), ybuf_.get(), dy,
                                        x_desc_.get(), dx, state_.get(), p.hx, dhy, dhx, state_.get(), p.cx, dcy, dcx,
                                        weight_bytes_, w_.get(), ws_.bytes(), ws_.get(), rs_.bytes(), rs_.get()),
                "cudnnRNNBackwardData_v8");

    float* g_w = grad(gx, 1);
    float* g_r = grad(gx, 2);
    float* g_b = has_bias_ ? grad(gx, 3) : nullptr;
    if (g_w || g_r || g_b) {
      // cuDNN adds the weight gradients to what dweightSpace holds.
      check_cuda(cudaMemsetAsync(dw_.get(), 0, weight_bytes_, op_stream()), "cudaMemsetAsync");
      check_cudnn(cudnnRNNBackwardWeights_v8(h, rnn_.get(), CUDNN_WGRAD_MODE_ADD, lens_dev_.as<int32_t>(),
                                             x_desc_.get(), p.x, state_.get(), p.hx, y_desc_.get(), ybuf_.get(),
                                             weight_bytes_, dw_.get(), ws_.bytes(), ws_.get(), rs_.bytes(), rs_.get()),
                  "cudnnRNNBackwardWeights_v8");
      unpack_gradients(g_w, g_r, g_b);
    }

    if (g_x && reverse_)
      rnn_kernels::reverse_sequences(dx, g_x, lens_dev_.as<int32_t>(), seq_, batch_, input_, batch_major_, nullptr);
    if (g_h0 && swap_states) rnn_kernels::swap_middle_axes(dhx, g_h0, 1, dirs_, batch_, hidden_, op_stream());
    if (g_c0 && swap_states) rnn_kernels::swap_middle_axes(dcx, g_c0, 1, dirs_, batch_, hidden_, op_stream());
    check_launch("rnn input gradients");
  }

 private:
  // Where one linear layer's matrix and bias sit in the weight space, in floats from its start.
  struct Slot {
    int64_t matrix = 0, bias = 0;
  };
  // What cuDNN reads for X, initial_h and initial_c (null: zeros).
  struct Prepared {
    const float *x = nullptr, *hx = nullptr, *cx = nullptr;
  };

  static float* grad(std::span<Tensor> gx, size_t i) { return i < gx.size() && gx[i].defined() ? fptr(gx[i]) : nullptr; }
  static const float* grad(std::span<const Tensor> gy, size_t i) {
    return i < gy.size() && gy[i].defined() ? fptr(gy[i]) : nullptr;
  }
  static float* output(std::span<Tensor> out, size_t i) {
    return i < out.size() && out[i].defined() && out[i].numel() > 0 ? fptr(out[i]) : nullptr;
  }
  static float* ensure(DeviceBuffer& b, int64_t floats) {
    const size_t bytes = static_cast<size_t>(floats) * sizeof(float);
    if (b.bytes() < bytes) b = DeviceBuffer(bytes);
    return b.as<float>();
  }

  int64_t y_elems() const { return seq_ * batch_ * dirs_ * hidden_; }
  int64_t x_elems() const { return seq_ * batch_ * input_; }
  int64_t state_elems() const { return dirs_ * batch_ * hidden_; }
  // ONNX Y is [seq, directions, batch, hidden] for layout=0; cuDNN's [seq, batch, directions, hidden].
  bool y_transposed() const { return dirs_ == 2 && !batch_major_; }
  // ONNX states are [batch, directions, hidden] for layout=1; cuDNN's [directions, batch, hidden].
  bool states_transposed() const { return dirs_ == 2 && batch_major_; }

  cudnnRNNMode_t rnn_mode(const OpSpec& s) const {
    const auto names = s.attrs.get_strings("activations", {});
    if (lstm_ || kind_.gates == 3) {
      const auto& want = kind_.activations;
      bool ok = names.empty() || names.size() == want.size() || names.size() == want.size() * static_cast<size_t>(dirs_);
      for (size_t k = 0; ok && k < names.size(); ++k) ok = same_name(names[k], want[k % want.size()]);
      refuse_if(!ok, "activations [{}]: cuDNN's {} runs [{}] only", fmt::join(names, ", "), s.type,
                fmt::join(want, ", "));
      return lstm_ ? CUDNN_LSTM : CUDNN_GRU;
    }
    if (names.empty()) return CUDNN_RNN_TANH;
    const bool relu = same_name(names[0], "Relu");
    bool ok = relu || same_name(names[0], "Tanh");
    for (const auto& n : names) ok = ok && same_name(n, names[0]);
    refuse_if(!ok, "activations [{}]: cuDNN's RNN runs Tanh or Relu, the same in both directions",
              fmt::join(names, ", "));
    return relu ? CUDNN_RNN_RELU : CUDNN_RNN_TANH;
  }

  // The data descriptors, device lengths and temporary spaces for lens_host_.
  void apply_lengths() {
    const cudnnRNNDataLayout_t layout =
        batch_major_ ? CUDNN_RNN_DATA_LAYOUT_BATCH_MAJOR_UNPACKED : CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_UNPACKED;
    check_cudnn(cudnnSetRNNDataDescriptor(x_desc_.get(), CUDNN_DATA_FLOAT, layout, static_cast<int>(seq_),
                                          static_cast<int>(batch_), static_cast<int>(input_), lens_host_.data(),
                                          &fill_),
                "cudnnSetRNNDataDescriptor");
    check_cudnn(cudnnSetRNNDataDescriptor(y_desc_.get(), CUDNN_DATA_FLOAT, layout, static_cast<int>(seq_),
                                          static_cast<int>(batch_), static_cast<int>(dirs_ * hidden_),
                                          lens_host_.data(), &fill_),
                "cudnnSetRNNDataDescriptor");
    // Synchronous on the operators' stream: earlier calls reading the lengths have finished.
    check_cuda(cudaMemcpy(lens_dev_.get(), lens_host_.data(), lens_host_.size() * sizeof(int32_t),
                          cudaMemcpyHostToDevice),
               "cudaMemcpy");
    size_t ws = 0, rs = 0;
    check_cudnn(cudnnGetRNNTempSpaceSizes(cudnn_handle(), rnn_.get(), CUDNN_FWD_MODE_TRAINING, x_desc_.get(), &ws, &rs),
                "cudnnGetRNNTempSpaceSizes");
    if (ws_.bytes() < ws) ws_ = DeviceBuffer(ws);
    if (rs_.bytes() < rs) rs_ = DeviceBuffer(rs);
  }

  // sequence_lens from the device, checked as the reference checks them; an empty sequence runs
  // as one step (cuDNN fails on empty ones) and is masked.
  void read_lengths(const Tensor& t) {
    const auto n = static_cast<size_t>(batch_);
    std::vector<int64_t> v(n);
    if (lens64_) {
      check_cuda(cudaMemcpy(v.data(), t.data(), n * sizeof(int64_t), cudaMemcpyDefault), "cudaMemcpy");
    } else {
      std::vector<int32_t> v32(n);
      check_cuda(cudaMemcpy(v32.data(), t.data(), n * sizeof(int32_t), cudaMemcpyDefault), "cudaMemcpy");
      std::copy(v32.begin(), v32.end(), v.begin());
    }
    for (size_t b = 0; b < n; ++b)
      D5_CHECK_ARG(v[b] >= 0 && v[b] <= seq_, "{}: sequence_lens[{}] = {} is outside [0, {}]", spec_.label(), b, v[b],
                   seq_);
    empty_.clear();
    varlen_ = false;
    for (size_t b = 0; b < n; ++b) {
      if (v[b] == 0) empty_.push_back(static_cast<int64_t>(b));
      if (v[b] < seq_) varlen_ = true;
      lens_host_[b] = static_cast<int32_t>(std::max<int64_t>(v[b], 1));
    }
    apply_lengths();
  }

  // Each linear layer's place in the weight space, checked against the extents it must have.
  void locate_weights() {
    CudnnTensor m_desc, b_desc;
    const int64_t ids = 2 * kind_.gates;
    slots_.assign(static_cast<size_t>(dirs_ * ids), Slot{});
    auto* base = static_cast<char*>(w_.get());
    for (int64_t d = 0; d < dirs_; ++d)
      for (int64_t id = 0; id < ids; ++id) {
        void *m = nullptr, *b = nullptr;
        check_cudnn(cudnnGetRNNWeightParams(cudnn_handle(), rnn_.get(), static_cast<int32_t>(d), weight_bytes_,
                                            w_.get(), static_cast<int32_t>(id), m_desc.get(), &m, b_desc.get(), &b),
                    "cudnnGetRNNWeightParams");
        const int64_t cols = id < kind_.gates ? input_ : hidden_;
        const int64_t m_count = numel_of(m_desc), b_count = numel_of(b_desc);
        D5_CHECK(m && b && m_count == hidden_ * cols && b_count == hidden_, Internal,
                 "{}: cuDNN's linear layer {} of direction {} has a {}-element matrix and a {}-element bias; "
                 "expected {} x {} and {}",
                 spec_.label(), id, d, m_count, b_count, hidden_, cols, hidden_);
        Slot& s = slots_[static_cast<size_t>(d * ids + id)];
        s.matrix = (static_cast<char*>(m) - base) / static_cast<int64_t>(sizeof(float));
        s.bias = (static_cast<char*>(b) - base) / static_cast<int64_t>(sizeof(float));
      }
  }

  static int64_t numel_of(const CudnnTensor& t) {
    cudnnDataType_t type{};
    int nb = 0;
    std::array<int, 8> dims{}, strides{};
    check_cudnn(cudnnGetTensorNdDescriptor(t.get(), 8, &type, &nb, dims.data(), strides.data()),
                "cudnnGetTensorNdDescriptor");
    int64_t n = 1;
    for (int k = 0; k < nb && k < 8; ++k) n *= dims[static_cast<size_t>(k)];
    return n;
  }

  // ONNX gate k of direction d: input-side and recurrent-side slots.
  const Slot& input_slot(int64_t d, int64_t k) const {
    return slots_[static_cast<size_t>(d * 2 * kind_.gates + kind_.cudnn_gate[static_cast<size_t>(k)])];
  }
  const Slot& recurrent_slot(int64_t d, int64_t k) const {
    return slots_[static_cast<size_t>(d * 2 * kind_.gates + kind_.gates + kind_.cudnn_gate[static_cast<size_t>(k)])];
  }

  // W [D, G*H, I], R [D, G*H, H], B [D, 2*G*H] (Wb then Rb) into cuDNN's weight space.
  void pack_weights(std::span<const Tensor> in) {
    float* w = w_.as<float>();
    const int64_t G = kind_.gates, H = hidden_, I = input_;
    for (int64_t d = 0; d < dirs_; ++d)
      for (int64_t k = 0; k < G; ++k) {
        const Slot &si = input_slot(d, k), &sr = recurrent_slot(d, k);
        copy_device(w + si.matrix, fptr(in[1]) + (d * G + k) * H * I, static_cast<size_t>(H * I) * sizeof(float));
        copy_device(w + sr.matrix, fptr(in[2]) + (d * G + k) * H * H, static_cast<size_t>(H * H) * sizeof(float));
        if (!has_bias_) continue;
        const float* b = fptr(in[3]) + d * 2 * G * H;
        copy_device(w + si.bias, b + k * H, static_cast<size_t>(H) * sizeof(float));
        copy_device(w + sr.bias, b + (G + k) * H, static_cast<size_t>(H) * sizeof(float));
      }
  }

  // The same places of the weight gradients, into dW, dR and dB (each may be null: not wanted).
  void unpack_gradients(float* g_w, float* g_r, float* g_b) const {
    const float* dw = dw_.as<float>();
    const int64_t G = kind_.gates, H = hidden_, I = input_;
    for (int64_t d = 0; d < dirs_; ++d)
      for (int64_t k = 0; k < G; ++k) {
        const Slot &si = input_slot(d, k), &sr = recurrent_slot(d, k);
        if (g_w) copy_device(g_w + (d * G + k) * H * I, dw + si.matrix, static_cast<size_t>(H * I) * sizeof(float));
        if (g_r) copy_device(g_r + (d * G + k) * H * H, dw + sr.matrix, static_cast<size_t>(H * H) * sizeof(float));
        if (!g_b) continue;
        float* b = g_b + d * 2 * G * H;
        copy_device(b + k * H, dw + si.bias, static_cast<size_t>(H) * sizeof(float));
        copy_device(b + (G + k) * H, dw + sr.bias, static_cast<size_t>(H) * sizeof(float));
      }
  }

  Prepared prepare(std::span<const Tensor> in) {
    Prepared p;
    p.x = fptr(in[0]);
    if (reverse_) {
      float* buf = ensure(xbuf_, x_elems());
      rnn_kernels::reverse_sequences(p.x, buf, lens_dev_.as<int32_t>(), seq_, batch_, input_, batch_major_, nullptr);
      check_launch("reverse_sequences");
      p.x = buf;
    }
    auto state = [&](bool given, size_t i, DeviceBuffer& buf) -> const float* {
      if (!given) return nullptr;
      if (!states_transposed()) return fptr(in[i]);
      float* b = ensure(buf, state_elems());
      rnn_kernels::swap_middle_axes(fptr(in[i]), b, 1, batch_, dirs_, hidden_, op_stream());  // -> [D, N, H]
      check_launch("swap_middle_axes");
      return b;
    };
    p.hx = state(has_h0_, 5, hxbuf_);
    p.cx = state(has_c0_, 6, cxbuf_);
    return p;
  }

  // dY_h / dY_c in cuDNN's layout, zero for empty sequences; null when none arrives.
  const float* upstream_state(const float* g, DeviceBuffer& buf) {
    if (!g) return nullptr;
    if (!states_transposed() && empty_.empty()) return g;
    float* b = ensure(buf, state_elems());
    if (states_transposed()) {
      rnn_kernels::swap_middle_axes(g, b, 1, batch_, dirs_, hidden_, op_stream());  // -> [D, N, H]
      check_launch("swap_middle_axes");
    } else {
      copy_device(b, g, static_cast<size_t>(state_elems()) * sizeof(float));
    }
    zero_state_rows(b);
    return b;
  }

  // The first step of each empty sequence in cuDNN's Y layout (every direction).
  void zero_step_rows(float* y) const {
    const int64_t row = dirs_ * hidden_;
    for (int64_t b : empty_) {
      const int64_t at = (batch_major_ ? b * seq_ : b) * row;
      check_cuda(cudaMemsetAsync(y + at, 0, static_cast<size_t>(row) * sizeof(float), op_stream()), "cudaMemsetAsync");
    }
  }
  // Each empty sequence's rows of a [directions, batch, hidden] state.
  void zero_state_rows(float* s) const {
    if (!s) return;
    for (int64_t b : empty_)
      for (int64_t d = 0; d < dirs_; ++d)
        check_cuda(cudaMemsetAsync(s + (d * batch_ + b) * hidden_, 0, static_cast<size_t>(hidden_) * sizeof(float), op_stream()),
                   "cudaMemsetAsync");
  }

  const CellKind& kind_;
  bool lstm_ = false, batch_major_ = false, reverse_ = false, tf32_ = false, default_math_ = false;
  bool has_bias_ = false, has_lens_ = false, lens64_ = false, has_h0_ = false, has_c0_ = false;
  bool ran_forward_ = false, varlen_ = false;
  int64_t seq_ = 0, batch_ = 0, input_ = 0, hidden_ = 0, dirs_ = 1;
  CudnnDropout dropout_;  // before rnn_, which refers to it
  CudnnRnn rnn_;
  CudnnRnnData x_desc_, y_desc_;
  CudnnTensor state_;
  std::vector<int32_t> lens_host_;  // what cuDNN runs: at least 1
  std::vector<int64_t> empty_;      // batch rows of the last forward whose sequence was empty
  std::vector<Slot> slots_;         // [direction][cuDNN linear layer id]
  size_t weight_bytes_ = 0;
  float fill_ = 0.0f;  // what cuDNN writes to Y past a sequence's end
  DeviceBuffer lens_dev_, w_, dw_, ws_, rs_;
  DeviceBuffer ybuf_;                                         // cuDNN's Y of the last forward
  DeviceBuffer xbuf_, dxbuf_, dybuf_;                         // reversed X, dX; dY in cuDNN's layout
  DeviceBuffer hxbuf_, cxbuf_, hybuf_, cybuf_;                // states in cuDNN's layout
  DeviceBuffer dhybuf_, dcybuf_, dhxbuf_, dcxbuf_;            // and their gradients
};

}  // namespace

void register_rnn_ops(OpRegistry& r) {
  const std::string notes =
      "cuda: f32; cuDNN RNN (cudnnRNNForward in training mode, BackwardData_v8, BackwardWeights_v8; standard "
      "algorithm, double bias): every direction, layout and sequence_lens; GRU with linear_before_reset=1 only; "
      "refuses P, input_forget, clip and activations cuDNN does not run";
  for (const char* type : {"LSTM", "GRU", "RNN"})
    add_op(
        r, type, [](const OpSpec& s) -> std::unique_ptr<Operator> { return std::make_unique<CudnnRnnOp>(s); },
        {.backward = true, .any_dtype = true, .notes = notes});
}

}  // namespace d5::cuda

#pragma GCC diagnostic pop
