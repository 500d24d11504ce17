// The TorchOp mechanism itself: kernels see the caller's buffers (no copies), forward records no
// autograd graph, backward replays the kernel under autograd (and so needs no prior forward),
// undefined upstream gradients are zeros, and every operator of the reference set is there.
#include <torch/csrc/autograd/grad_mode.h>

#include <set>
#include <sstream>

#include "../../../src/backends/torch/torch_op.h"
#include "deep500/backends/builtin.h"
#include "torch_test_util.h"

namespace d5::test {

namespace {

using torch_backend::Call;
using torch_backend::OpDef;
using torch_backend::TorchOp;

// What a kernel saw on its last call.
struct Seen {
  std::vector<const void*> in, out;
  bool grad_mode = false, replay = false, leaf_requires_grad = false;
};

}  // namespace

TEST(TorchMechanism, ViewsAreTheCallersBuffers) {
  const auto x = random_input({DType::f32, {3, 4}}, "x");
  const auto v = torch_backend::view_of(x);
  EXPECT_EQ(v.data_ptr(), x.data());
  EXPECT_EQ(v.sizes(), at::IntArrayRef({3, 4}));
  EXPECT_EQ(v.scalar_type(), at::kFloat);
  EXPECT_FALSE(torch_backend::view_of(Tensor()).defined());
  EXPECT_EQ(torch_backend::view_of(Tensor(DType::i64, Shape{0, 2})).numel(), 0);
}

TEST(TorchMechanism, ForwardWithoutGraphBackwardByReplay) {
  register_builtin_operators();
  const auto x = random_input({DType::f64, {2, 3}}, "x", -2, 2);
  const OpSpec spec = spec_of("Tanh", {x.desc()});
  auto ref = OpRegistry::global().create(spec, "reference");
  auto seen = std::make_shared<Seen>();
  TorchOp op(spec, semantics_of(*ref),
             OpDef{[seen](const Call& c) -> std::vector<at::Tensor> {
                     seen->in = {c.in[0].data_ptr()};
                     seen->out.clear();
                     for (const auto& o : c.out) seen->out.push_back(o.defined() ? o.data_ptr() : nullptr);
                     seen->grad_mode = at::GradMode::is_enabled();
                     seen->replay = c.replay;
                     seen->leaf_requires_grad = c.in[0].requires_grad();
                     return {at::tanh(c.in[0])};
                   },
                   "at::tanh"});
  EXPECT_EQ(op.implementation(), "torch:at::tanh");
  // Backward first: it recomputes, so it needs no forward.
  const auto gy = random_input(x.desc(), "gy");
  const Tensor y = ref->run_forward(std::vector<Tensor>{x})[0];
  const auto gx = op.run_backward(std::vector<Tensor>{gy}, std::vector<Tensor>{x}, std::vector<Tensor>{y});
  EXPECT_TRUE(seen->replay);
  EXPECT_TRUE(seen->grad_mode);
  EXPECT_TRUE(seen->leaf_requires_grad);
  EXPECT_EQ(seen->in[0], x.data());  // the leaf is a detached view: still the caller's buffer
  for (int64_t i = 0; i < x.numel(); ++i)
    EXPECT_NEAR(gx[0].get(i), gy.get(i) * (1 - y.get(i) * y.get(i)), 1e-12);

  std::vector<Tensor> out = {Tensor::uninitialized(x.desc())};
  const void* given = out[0].data();
  op.forward(std::vector<Tensor>{x}, out);
  EXPECT_FALSE(seen->replay);
  EXPECT_FALSE(seen->grad_mode);  // no graph recorded
  EXPECT_FALSE(seen->leaf_requires_grad);
  EXPECT_EQ(seen->in[0], x.data());
  EXPECT_EQ(seen->out[0], given);  // the kernel saw the caller's buffer...
  EXPECT_NE(out[0].data(), given);  // ...and its fresh result was adopted instead of copied into it
  expect_close(out[0], y, tol_for(DType::f64), "forward");
}

// Owned outputs and input gradients take over ATen's results; views are written in place; a
// result that shares its buffer (an input's view, a kernel's kept tensor) is copied.
TEST(TorchMechanism, OwnedOutputsAdoptAtenResultsViewsAreWrittenInPlace) {
  register_builtin_operators();
  const auto in = random_inputs({{DType::f32, {2, 3, 9, 9}}, {DType::f32, {4, 3, 3, 3}}});
  auto op = OpRegistry::global().create(spec_of("Conv", {in[0].desc(), in[1].desc()}), "torch");
  auto ref = OpRegistry::global().create(spec_of("Conv", {in[0].desc(), in[1].desc()}), "reference");
  const auto ref_out = ref->run_forward(in);
  const TensorDesc y = op->output_descs()[0];

  const auto before = tensor_memory_stats();
  std::vector<Tensor> owned = {Tensor::uninitialized(y)};
  const void* given = owned[0].data();
  op->forward(in, owned);
  EXPECT_NE(owned[0].data(), given);
  EXPECT_FALSE(owned[0].is_view());
  EXPECT_EQ(owned[0].desc(), y);
  // The given buffer was released and the adopted one counts in its place.
  EXPECT_EQ(tensor_memory_stats().current_bytes,
            before.current_bytes + static_cast<int64_t>(y.bytes()));
  expect_close(owned[0], ref_out[0], tol_for(DType::f32), "adopted output");

  std::vector<float> buffer(static_cast<size_t>(y.shape.numel()));
  std::vector<Tensor> view = {Tensor::view(y, buffer.data())};
  op->forward(in, view);
  EXPECT_EQ(view[0].data(), buffer.data());
  expect_close(view[0], ref_out[0], tol_for(DType::f32), "view output");

  // Input gradients: owned ones adopt, view ones are written.
  const std::vector<Tensor> gy = {random_input(y, "gy")};
  const auto ref_gx = ref->run_backward(gy, in, ref_out);
  std::vector<Tensor> gx = {Tensor::uninitialized(in[0].desc()), Tensor::uninitialized(in[1].desc())};
  const void* gx_given = gx[0].data();
  op->backward(gy, in, owned, gx);
  EXPECT_NE(gx[0].data(), gx_given);
  std::vector<float> gw_buffer(static_cast<size_t>(in[1].numel()));
  std::vector<Tensor> gx_view = {Tensor(), Tensor::view(in[1].desc(), gw_buffer.data())};
  op->backward(gy, in, owned, gx_view);
  EXPECT_EQ(gx_view[1].data(), gw_buffer.data());
  for (size_t i = 0; i < 2; ++i)
    expect_close(gx[i], ref_gx[i], tol_for(DType::f32), "gradient of input " + std::to_string(i));
  expect_close(gx_view[1], ref_gx[1], tol_for(DType::f32), "gradient into a view");

  // Identity's kernel returns the input itself: never adopted, or the output would alias X.
  auto id = OpRegistry::global().create(spec_of("Identity", {in[0].desc()}), "torch");
  auto out = id->run_forward(std::vector<Tensor>{in[0]});
  EXPECT_NE(out[0].data(), in[0].data());
  expect_close(out[0], in[0], {0, 0}, "identity");
}

TEST(TorchMechanism, UndefinedUpstreamGradientsAreZero) {
  register_builtin_operators();
  const auto in = random_inputs({{DType::f32, {2, 3}}, {DType::f32, {3}}});
  auto op = OpRegistry::global().create(spec_of("Mul", {in[0].desc(), in[1].desc()}), "torch");
  const auto out = op->run_forward(in);
  auto gx = op->run_backward(std::vector<Tensor>{Tensor()}, in, out);
  for (const auto& g : gx)
    for (int64_t i = 0; i < g.numel(); ++i) EXPECT_EQ(g.get(i), 0.0);
  // A gradient the op does not depend on (LayerNorm's Mean without upstream for Y) is zeros too.
  const auto x = random_input({DType::f64, {2, 4}}, "x"), s = random_input({DType::f64, {4}}, "s");
  auto ln = OpRegistry::global().create(spec_of("LayerNormalization", {x.desc(), s.desc()}), "torch");
  const auto lo = ln->run_forward(std::vector<Tensor>{x, s});
  const auto lg = ln->run_backward(std::vector<Tensor>{Tensor(), random_input(lo[1].desc(), "g1"), Tensor()},
                                   std::vector<Tensor>{x, s}, lo);
  for (int64_t i = 0; i < lg[1].numel(); ++i) EXPECT_EQ(lg[1].get(i), 0.0);  // Scale does not reach Mean
}

TEST(TorchMechanism, OpsWithoutGradientSayWhy) {
  register_builtin_operators();
  const auto a = random_inputs({{DType::f32, {3}}, {DType::f32, {3}}});
  auto op = OpRegistry::global().create(spec_of("Less", {a[0].desc(), a[1].desc()}), "torch");
  EXPECT_FALSE(op->has_gradient());
  EXPECT_FALSE(op->no_gradient_reason().empty());
  const auto out = op->run_forward(a);
  EXPECT_THROW(op->run_backward(std::vector<Tensor>{Tensor()}, a, out), Error);
}

// The reference operator set of the brief: all have a torch implementation, with backward where
// the reference has one.
TEST(TorchMechanism, CoversTheReferenceSet) {
  register_builtin_operators();
  const std::string ops =
      "Conv ConvTranspose Gemm MatMul Relu LeakyRelu Sigmoid Tanh Clip Elu Selu Gelu Softplus HardSigmoid "
      "HardSwish Softmax LogSoftmax MaxPool AveragePool GlobalAveragePool GlobalMaxPool BatchNormalization "
      "LayerNormalization InstanceNormalization LRN Dropout Add Sub Mul Div Pow Sqrt Exp Log Neg Abs Reciprocal "
      "Sum Mean Max Min ReduceMean ReduceSum ReduceMax ReduceL2 Concat Split Slice Reshape Flatten Transpose "
      "Squeeze Unsqueeze Pad Gather Expand Shape Identity Constant Cast Where Equal Less Greater ArgMax LSTM GRU "
      "RNN SoftmaxCrossEntropyLoss NegativeLogLikelihoodLoss MSELoss";
  int forward = 0, backward = 0;
  std::istringstream words(ops);
  for (std::string type; words >> type;) {
    const auto torch = OpRegistry::global().implementations(type, "torch");
    const auto ref = OpRegistry::global().implementations(type, "reference");
    ASSERT_EQ(torch.size(), 1u) << type;
    // The reference has one implementation per op, and two algorithms for Conv (batched first).
    ASSERT_EQ(ref.size(), type == "Conv" ? 2u : 1u) << type;
    EXPECT_EQ(torch[0]->backward, ref.back()->backward) << type;
    EXPECT_FALSE(torch[0]->notes.empty()) << type;
    ++forward;
    backward += torch[0]->backward;
  }
  EXPECT_EQ(forward, 71);
  EXPECT_EQ(backward, 65);  // all but Shape, Constant, Equal, Less, Greater, ArgMax
  // Beyond the brief's set: every operator type the reference implements, except those without an
  // ATen counterpart, where executors fall back to the reference's: MelWeightMatrix (a table of
  // constants ATen has no function for), RoiAlign and NonMaxSuppression (torchvision's operators,
  // not LibTorch's), SsdLoss (deep500's detection loss: anchor matching and hard-negative mining,
  // no ATen function), and Resize (not yet: ATen's upsample kernels cover only some of its
  // coordinate modes).
  const std::set<std::string> without_aten = {"MelWeightMatrix", "RoiAlign", "NonMaxSuppression", "SsdLoss",
                                              "Resize"};
  for (const auto& type : OpRegistry::global().op_types()) {
    if (OpRegistry::global().implementations(type, "reference").empty() || without_aten.count(type)) continue;
    EXPECT_EQ(OpRegistry::global().implementations(type, "torch").size(), 1u) << type;
  }
}

}  // namespace d5::test
