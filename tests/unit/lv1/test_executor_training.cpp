// The operator executors train: gradients equal finite differences of the whole network, and
// plain SGD steps written here reduce the loss.
#include <gtest/gtest.h>

#include <cmath>

#include "deep500/backends/builtin.h"
#include "deep500/net/graph_executor.h"
#include "deep500/op/op_registry.h"
#include "executor_test_nets.h"

namespace d5 {
namespace {

class ExecutorTrainingTest : public ::testing::TestWithParam<std::string> {
 protected:
  static void SetUpTestSuite() { register_builtin_operators(); }
};

double loss_of(GraphExecutor& ex, const TensorMap& feeds) {
  return ex.inference_and_backprop(feeds, "loss_value").at("loss_value").get(0);
}

// Central differences of the loss with respect to every parameter element, in double.
void expect_gradients_match_finite_differences(Network& net, int64_t classes, const std::string& backend) {
  auto ex = make_executor(net, backend);
  const auto feeds = test::feeds_for(net, classes);
  ex->inference_and_backprop(feeds, "loss_value");
  std::map<std::string, Tensor> grads;
  for (const auto& [p, g] : net.gradient()) grads[p] = net.fetch_tensor(g).clone();
  // f64: a step of 1e-6 leaves a truncation error ~1e-12 |f'''| and a rounding error ~1e-10; the
  // tolerance is three orders above both, and far below the size of any real gradient error.
  const double eps = 1e-6;
  int64_t checked = 0;
  for (const auto& [p, g] : grads) {
    const Tensor original = net.fetch_tensor(p).clone();
    for (int64_t i = 0; i < original.numel(); ++i) {
      Tensor v = original.clone();
      v.set(i, original.get(i) + eps);
      net.feed_tensor(p, v);
      const double up = loss_of(*ex, feeds);
      v.set(i, original.get(i) - eps);
      net.feed_tensor(p, v);
      const double down = loss_of(*ex, feeds);
      const double fd = (up - down) / (2 * eps);
      EXPECT_NEAR(g.get(i), fd, 1e-7 + 1e-6 * std::abs(fd))
          << net.name() << " " << p << "[" << i << "] on " << backend;
      ++checked;
    }
    net.feed_tensor(p, original);
  }
  EXPECT_GT(checked, 0);
}

TEST_P(ExecutorTrainingTest, GradientsOfTheWholeNetworkMatchFiniteDifferences) {
  const std::string backend = GetParam();
  {
    Network net = test::mlp(3, 4, 5, 3, DType::f64);
    expect_gradients_match_finite_differences(net, 3, backend);
  }
  {
    Network net = test::cnn(2, 3, DType::f64);
    expect_gradients_match_finite_differences(net, 3, backend);
  }
  {
    Network net = test::residual(3, 4, 3, DType::f64);  // fan-out: gradients of h are summed
    expect_gradients_match_finite_differences(net, 3, backend);
  }
  {
    Network net = test::shape_chain(2, 3, DType::f64);  // folded nodes in between
    expect_gradients_match_finite_differences(net, 3, backend);
  }
}

// Plain SGD through the network's API, as an optimizer would do it: fetch p and its gradient,
// feed p - lr * g. Returns the losses before the first and after the last step.
std::pair<double, double> train(Network& net, const std::string& backend, const TensorMap& feeds, double lr,
                                int steps) {
  auto ex = make_executor(net, backend);
  const double first = loss_of(*ex, feeds);
  for (int s = 0; s < steps; ++s) {
    ex->inference_and_backprop(feeds, "loss_value");
    for (const auto& [p, gname] : net.gradient()) {
      Tensor value = net.fetch_tensor(p).clone();
      const Tensor g = net.fetch_tensor(gname);
      for (int64_t i = 0; i < value.numel(); ++i) value.set(i, value.get(i) - lr * g.get(i));
      net.feed_tensor(p, value);
    }
  }
  return {first, loss_of(*ex, feeds)};
}

TEST_P(ExecutorTrainingTest, SgdReducesTheLossOfAnMlp) {
  Network net = test::mlp(64, 10, 32, 4);
  const auto feeds = test::feeds_for(net, 4);
  const auto [first, last] = train(net, GetParam(), feeds, 0.5, 100);
  // Four balanced classes start near ln 4 = 1.39; the teacher's labels are a linear function of
  // x, which this MLP represents, so 100 full-batch steps fit them to well under half of that.
  EXPECT_NEAR(first, std::log(4.0), 0.3);
  EXPECT_LT(last, 0.5 * first) << "loss " << first << " -> " << last;
  std::printf("MLP on %s: loss %.4f -> %.4f after 100 SGD steps\n", GetParam().c_str(), first, last);
}

TEST_P(ExecutorTrainingTest, SgdReducesTheLossOfACnn) {
  Network net = test::cnn(32, 3);
  const auto feeds = test::feeds_for(net, 3);
  const auto [first, last] = train(net, GetParam(), feeds, 0.2, 60);
  EXPECT_LT(last, 0.6 * first) << "loss " << first << " -> " << last;
  std::printf("CNN on %s: loss %.4f -> %.4f after 60 SGD steps\n", GetParam().c_str(), first, last);
}

std::vector<std::string> backends_to_test() {
  register_builtin_operators();
  return executor_backends();
}

INSTANTIATE_TEST_SUITE_P(Executors, ExecutorTrainingTest, ::testing::ValuesIn(backends_to_test()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace d5
