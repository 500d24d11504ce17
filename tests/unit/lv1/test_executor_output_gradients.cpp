// The gradients the operator executor passes for outputs nothing differentiates: zero-filled
// tensors by default, undefined ones to an operator that says it takes them as zero
// (spi/sparse_output_gradients.h). Checked on BatchNormalization in training mode, whose running
// statistics are outputs no loss reads, wrapped to record what its backward receives; the
// gradients must be the reference executor's either way.
#include <gtest/gtest.h>

#include "deep500/backends/builtin.h"
#include "deep500/core/backend.h"
#include "deep500/net/operator_executor.h"
#include "deep500/op/op_registry.h"
#include "deep500/spi/sparse_output_gradients.h"

namespace d5 {
namespace {

// Which grad_outputs were defined in the last backward call of either wrapper.
std::vector<bool> g_defined;

class RecordingOp : public Operator {
 public:
  explicit RecordingOp(std::unique_ptr<Operator> inner)
      : Operator(inner->spec(), inner->output_descs()), inner_(std::move(inner)) {}
  std::string implementation() const override { return "recording(" + inner_->implementation() + ")"; }
  std::vector<bool> differentiable_inputs() const override { return inner_->differentiable_inputs(); }
  void forward(std::span<const Tensor> in, std::span<Tensor> out) override { inner_->forward(in, out); }
  void backward(std::span<const Tensor> gy, std::span<const Tensor> in, std::span<const Tensor> out,
                std::span<Tensor> gx) override {
    g_defined.clear();
    for (const Tensor& g : gy) g_defined.push_back(g.defined());
    inner_->backward(gy, in, out, gx);
  }

 private:
  std::unique_ptr<Operator> inner_;
};

class SparseRecordingOp final : public RecordingOp, public SparseOutputGradients {
 public:
  using RecordingOp::RecordingOp;
};

// x[4, 3] -> BatchNormalization (training: y, running mean, running var) -> y * w -> sum.
Network batch_norm_net() {
  Network net("bn-train");
  net.feed_tensor("scale", Tensor::from_values<float>(Shape{3}, {1.0f, 0.5f, 2.0f}), true);
  net.feed_tensor("bias", Tensor::from_values<float>(Shape{3}, {0.1f, -0.2f, 0.3f}), true);
  net.feed_tensor("mean", Tensor::from_values<float>(Shape{3}, {0, 0, 0}));
  net.feed_tensor("var", Tensor::from_values<float>(Shape{3}, {1, 1, 1}));
  net.feed_tensor("w", Tensor::from_values<float>(Shape{4, 3}, {1, 2, 3, -1, 0.5f, 2, 0.25f, -2, 1, 3, 1, -0.5f}));
  net.add_input("x", TensorDesc{DType::f32, Shape{4, 3}});
  net.add_node({"bn", "BatchNormalization", "", Attributes{{"training_mode", int64_t{1}}},
                {"x", "scale", "bias", "mean", "var"}, {"y", "running_mean", "running_var"}});
  net.add_node({"mul", "Mul", "", {}, {"y", "w"}, {"yw"}});
  net.add_node({"sum", "ReduceSum", "", Attributes{{"keepdims", int64_t{0}}}, {"yw"}, {"loss"}});
  net.add_output("loss");
  return net;
}

std::map<std::string, Tensor> gradients_on(const std::string& backend) {
  Network net = batch_norm_net();
  OperatorExecutor ex(net, backend, {backend, "reference"});
  const Tensor x = Tensor::from_values<float>(Shape{4, 3}, {0.5f, -1, 2, 1.5f, 0.25f, -0.5f, -2, 1, 0, 0.75f, 3, 1});
  ex.inference_and_backprop({{"x", x}}, "loss");
  std::map<std::string, Tensor> grads;
  for (const auto& [param, grad] : net.gradient()) grads[grad] = net.fetch_tensor(grad).clone();
  return grads;
}

class ExecutorOutputGradients : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    register_builtin_operators();
    for (const auto& [backend, sparse] : {std::pair{"recording", false}, std::pair{"sparse-recording", true}}) {
      BackendInfo info;
      info.name = backend;
      info.description = "the reference BatchNormalization, recording its output gradients";
      info.version = "1";
      register_backend(info);
      const bool s = sparse;
      OpRegistry::global().add_or_replace(
          {"BatchNormalization", backend, backend, true,
           [s](const OpSpec& spec) -> OpCreateResult {
             auto inner = OpRegistry::global().create(spec, "reference");
             if (s) return std::unique_ptr<Operator>(std::make_unique<SparseRecordingOp>(std::move(inner)));
             return std::unique_ptr<Operator>(std::make_unique<RecordingOp>(std::move(inner)));
           },
           "the reference kernel, recording"});
    }
  }
};

void expect_same_gradients(const std::map<std::string, Tensor>& got, const std::map<std::string, Tensor>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (const auto& [name, w] : want) {
    const Tensor& g = got.at(name);
    ASSERT_EQ(g.shape(), w.shape()) << name;
    for (int64_t i = 0; i < w.numel(); ++i) EXPECT_EQ(g.get(i), w.get(i)) << name << " at " << i;
  }
}

TEST_F(ExecutorOutputGradients, ZeroFilledByDefault) {
  const auto want = gradients_on("reference");
  const auto got = gradients_on("recording");
  EXPECT_EQ(g_defined, (std::vector<bool>{true, true, true}));
  expect_same_gradients(got, want);
}

TEST_F(ExecutorOutputGradients, UndefinedForAnOperatorThatTakesThemAsZero) {
  const auto want = gradients_on("reference");
  const auto got = gradients_on("sparse-recording");
  EXPECT_EQ(g_defined, (std::vector<bool>{true, false, false}));
  ASSERT_EQ(want.size(), 2u);  // scale and bias
  expect_same_gradients(got, want);
}

}  // namespace
}  // namespace d5
