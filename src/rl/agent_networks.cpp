#include "agent_networks.h"

#include "deep500/core/error.h"
#include "lv1/zoo/zoo_builder.h"

namespace d5::rl {

namespace {

using zoo::Builder;
using zoo::Value;

ModelOptions options_for(const NetShape& s) {
  D5_CHECK_ARG(s.observation >= 1 && s.actions >= 2 && s.hidden >= 1 && s.batch >= 1,
               "agent network: observation {}, actions {}, hidden {}, batch {} (need >= 1, >= 2, >= 1, >= 1)",
               s.observation, s.actions, s.hidden, s.batch);
  ModelOptions o;
  o.batch = s.batch;
  o.classes = s.actions;
  o.input_shape = {s.observation};
  o.seed = s.seed;
  return o;
}

Value mlp(Builder& b, const Value& x, const std::string& scope, int64_t hidden, int64_t out, const char* activation) {
  Value h = b.linear(x, scope + ".fc1", hidden);
  h = b.node(activation, scope + ".act1", {h.name}, h.shape);
  h = b.linear(h, scope + ".fc2", hidden);
  h = b.node(activation, scope + ".act2", {h.name}, h.shape);
  return b.linear(h, scope + ".head", out);
}

// Adds node `op` over `inputs` writing `out`.
void add(Network& net, const std::string& op, std::vector<std::string> inputs, const std::string& out,
         Attributes attrs = {}) {
  net.add_node({out, op, "", std::move(attrs), std::move(inputs), {out}});
}

// sum over every element: a scalar.
void sum_all(Network& net, const std::string& in, const std::string& out) {
  add(net, "ReduceSum", {in}, out, Attributes{{"keepdims", int64_t{0}}});
}

void scalar(Network& net, const std::string& name, float v) {
  net.feed_tensor(name, Tensor::from_values<float>(Shape{}, {v}), false);
}

}  // namespace

Network build_actor_critic(const NetShape& shape, bool with_loss, double value_coef, double entropy_coef) {
  Builder b("actor-critic", options_for(shape));
  const Value x = b.input(1, "observation");
  const Value value = mlp(b, x, "v", shape.hidden, 1, "Tanh");
  const Value logits = mlp(b, x, "pi", shape.hidden, shape.actions, "Tanh");
  Network net = b.finish(logits);
  // The value head's last node writes "value".
  net.replace_uses(value.name, kValue);
  for (auto& o : net.mutable_node(net.producer(value.name)->name).outputs)
    if (o == value.name) o = kValue;
  net.add_output(kValue);
  if (!with_loss) {
    net.infer();
    return net;
  }
  const int64_t n = shape.batch, a = shape.actions;
  net.add_input(kActionWeights, TensorDesc{DType::f32, Shape{n, a}});
  net.add_input(kRowWeights, TensorDesc{DType::f32, Shape{n, 1}});
  net.add_input(kValueTargets, TensorDesc{DType::f32, Shape{n, 1}});
  add(net, "LogSoftmax", {kLogits}, "log_pi", Attributes{{"axis", int64_t{1}}});
  add(net, "Mul", {kActionWeights, "log_pi"}, "weighted_log_pi");
  sum_all(net, "weighted_log_pi", "policy_gain");
  add(net, "Sub", {kValue, kValueTargets}, "value_error");
  add(net, "Mul", {"value_error", "value_error"}, "value_error_sq");
  add(net, "Mul", {kRowWeights, "value_error_sq"}, "weighted_value_error_sq");
  sum_all(net, "weighted_value_error_sq", "value_loss");
  scalar(net, "value_coef", static_cast<float>(value_coef));
  add(net, "Mul", {"value_coef", "value_loss"}, "scaled_value_loss");
  add(net, "Sub", {"scaled_value_loss", "policy_gain"}, entropy_coef == 0 ? kLoss : "loss_without_entropy");
  if (entropy_coef != 0) {
    // -entropy = sum p log p; adding entropy_coef times it rewards spread-out policies.
    add(net, "Softmax", {kLogits}, "pi", Attributes{{"axis", int64_t{1}}});
    add(net, "Mul", {"pi", "log_pi"}, "p_log_p");
    add(net, "Mul", {kRowWeights, "p_log_p"}, "weighted_p_log_p");
    sum_all(net, "weighted_p_log_p", "neg_entropy");
    scalar(net, "entropy_coef", static_cast<float>(entropy_coef));
    add(net, "Mul", {"entropy_coef", "neg_entropy"}, "scaled_neg_entropy");
    add(net, "Add", {"loss_without_entropy", "scaled_neg_entropy"}, kLoss);
  }
  net.add_output(kLoss);
  net.infer();
  return net;
}

Network build_q_network(const NetShape& shape, bool with_loss) {
  Builder b("q-network", options_for(shape));
  const Value x = b.input(1, "observation");
  Network net = b.finish(mlp(b, x, "q", shape.hidden, shape.actions, "Relu"));
  if (!with_loss) {
    net.infer();
    return net;
  }
  const int64_t n = shape.batch, a = shape.actions;
  net.add_input(kActionWeights, TensorDesc{DType::f32, Shape{n, a}});
  net.add_input(kQTargets, TensorDesc{DType::f32, Shape{n, a}});
  add(net, "Sub", {kLogits, kQTargets}, "td_error");
  add(net, "Abs", {"td_error"}, "abs_td");
  scalar(net, "one", 1.0F);
  scalar(net, "half", 0.5F);
  add(net, "Min", {"abs_td", "one"}, "clipped_td");
  add(net, "Mul", {"clipped_td", "clipped_td"}, "clipped_sq");
  add(net, "Mul", {"half", "clipped_sq"}, "quadratic_part");
  add(net, "Sub", {"abs_td", "clipped_td"}, "linear_part");
  add(net, "Add", {"quadratic_part", "linear_part"}, "huber");
  add(net, "Mul", {kActionWeights, "huber"}, "weighted_huber");
  sum_all(net, "weighted_huber", kLoss);
  net.add_output(kLoss);
  net.infer();
  return net;
}

void share_parameters(const Network& from, Network& to) {
  for (const auto& name : from.get_params()) to.feed_tensor(name, from.fetch_tensor(name), true);
}

void copy_parameters(const Network& from, Network& to) {
  for (const auto& name : from.get_params()) {
    Tensor dst = to.fetch_tensor(name);
    dst.copy_from(from.fetch_tensor(name));
  }
}

}  // namespace d5::rl
