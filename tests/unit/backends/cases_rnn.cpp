// Shared cases: LSTM, GRU and RNN against the reference (forward and backpropagation through time).
#include "shared_cases.h"

namespace d5::test {

namespace {

struct RnnCase {
  int64_t seq = 3, batch = 2, input = 4, hidden = 3;
  std::string direction = "forward";
  int64_t layout = 0;
  bool bias = true, initial = true;
  std::vector<int32_t> lens;  // empty: no sequence_lens input
};

// Inputs X, W, R, [B], [sequence_lens], [initial_h], [initial_c] of an ONNX recurrent op, with
// absent optional inputs marked in the spec.
void check_rnn(const std::string& type, DType t, const RnnCase& c, Attributes attrs = {},
               std::optional<Tolerance> tol = std::nullopt) {
  const int64_t gates = type == "LSTM" ? 4 : type == "GRU" ? 3 : 1;
  const int64_t dirs = c.direction == "bidirectional" ? 2 : 1;
  const Shape x = c.layout ? Shape{c.batch, c.seq, c.input} : Shape{c.seq, c.batch, c.input};
  const Shape state = c.layout ? Shape{c.batch, dirs, c.hidden} : Shape{dirs, c.batch, c.hidden};
  std::vector<Tensor> in = {random_input({t, x}, "x"),
                            random_input({t, {dirs, gates * c.hidden, c.input}}, "w", -0.7, 0.7),
                            random_input({t, {dirs, gates * c.hidden, c.hidden}}, "r", -0.7, 0.7)};
  std::vector<bool> present = {true, true, true};
  auto add = [&](bool on, Tensor v) {
    in.push_back(on ? std::move(v) : Tensor());
    present.push_back(on);
  };
  add(c.bias, random_input({t, {dirs, 2 * gates * c.hidden}}, "b", -0.5, 0.5));
  Tensor lens(DType::i32, Shape{c.batch});
  for (size_t i = 0; i < c.lens.size(); ++i) lens.data_as<int32_t>()[i] = c.lens[i];
  add(!c.lens.empty(), lens);
  add(c.initial, random_input({t, state}, "h0"));
  if (type == "LSTM") add(c.initial, random_input({t, state}, "c0"));
  std::vector<TensorDesc> descs;
  for (const auto& v : in) descs.push_back(v.defined() ? v.desc() : TensorDesc{});
  attrs.set("direction", c.direction);
  attrs.set("layout", c.layout);
  attrs.set("hidden_size", c.hidden);
  OpSpec s = spec_of(type, descs, std::move(attrs));
  s.present = present;
  s.opset = 14;
  check_spec(s, in, tol);
}

}  // namespace

TEST(Recurrent, MatchesReference) {
  std::vector<RnnCase> cases(9);
  cases[1].direction = "bidirectional";
  cases[2].direction = "reverse";
  cases[3].layout = 1;
  cases[4].bias = false;
  cases[4].initial = false;
  cases[5].lens = {3, 1};  // shorter sequences: packed
  cases[6].direction = "bidirectional";
  cases[6].lens = {2, 0};  // an empty sequence
  cases[6].layout = 1;
  cases[7].direction = "reverse";
  cases[7].lens = {1, 3};
  cases[8].lens = {3, 3};  // full lengths: the plain path
  cases[8].seq = 5;
  cases[8].batch = 2;
  for (const char* type : {"LSTM", "GRU", "RNN"})
    for (const auto& c : cases)
      for (DType t : {DType::f32, DType::f64}) {
        SCOPED_TRACE(fmt::format("{} {} {} layout {} lens {}", type, to_string(t), c.direction, c.layout,
                                 c.lens.size()));
        // GRU runs as ATen computes it: the reset gate applied after the recurrent product.
        Attributes a;
        if (std::string(type) == "GRU") a.set("linear_before_reset", int64_t{1});
        check_rnn(type, t, c, a);
      }
  // RNN with Relu (in both directions).
  RnnCase bi;
  bi.direction = "bidirectional";
  check_rnn("RNN", DType::f64, bi, {{"activations", std::vector<std::string>{"Relu", "Relu"}}});
  check_rnn("RNN", DType::f32, {}, {{"activations", std::vector<std::string>{"relu"}}});
  // The defaults spelled out are accepted. (One set for both directions would do, but the
  // reference duplicates it with a self-referencing vector::insert, which loses the names.)
  check_rnn(
      "LSTM", DType::f64, bi,
      {{"activations", std::vector<std::string>{"Sigmoid", "Tanh", "Tanh", "sigmoid", "tanh", "tanh"}}});
  check_rnn(
      "GRU", DType::f32, {},
      {{"activations", std::vector<std::string>{"Sigmoid", "Tanh"}}, {"linear_before_reset", int64_t{1}}});
}

}  // namespace d5::test
