// The CUDA backend's LSTM, GRU and RNN (cuDNN's RNN API) against the reference on a GPU, forward
// and backward: the cases that exercise the backend's own mapping onto cuDNN (gate orders in the
// packed weight space, both directions' output and state transpositions, reversal within each
// sequence's length, empty sequences), and the refusals. Without a GPU they show as skipped.
#include <gtest/gtest.h>

#include "../ops/op_test_util.h"
#include "backend_test_util.h"
#include "cuda_test_util.h"
#include "deep500/op/op_bench.h"
#include "deep500/op/suites.h"

namespace d5::test {
namespace {

struct RnnCase {
  std::string type = "LSTM";
  int64_t seq = 5, batch = 3, input = 4, hidden = 6;
  std::string direction = "forward";
  int64_t layout = 0;
  bool bias = true, initial = true;
  std::vector<int64_t> lens;  // empty: no sequence_lens input
  DType lens_type = DType::i32;
  Attributes attrs;
};

// The spec and inputs X, W, R, [B], [sequence_lens], [initial_h], [initial_c] of a case; absent
// optional inputs are undefined tensors, marked absent in the spec.
std::pair<OpSpec, std::vector<Tensor>> rnn_problem(const RnnCase& c) {
  const int64_t gates = c.type == "LSTM" ? 4 : c.type == "GRU" ? 3 : 1;
  const int64_t dirs = c.direction == "bidirectional" ? 2 : 1;
  const Shape x = c.layout ? Shape{c.batch, c.seq, c.input} : Shape{c.seq, c.batch, c.input};
  const Shape state = c.layout ? Shape{c.batch, dirs, c.hidden} : Shape{dirs, c.batch, c.hidden};
  // Distinct values per gate and direction: a gate or direction taken for another shows.
  std::vector<Tensor> in = {random_input({DType::f32, x}, "x"),
                            random_input({DType::f32, {dirs, gates * c.hidden, c.input}}, "w", -0.7, 0.7),
                            random_input({DType::f32, {dirs, gates * c.hidden, c.hidden}}, "r", -0.7, 0.7)};
  std::vector<bool> present = {true, true, true};
  auto add = [&](bool on, Tensor v) {
    in.push_back(on ? std::move(v) : Tensor());
    present.push_back(on);
  };
  add(c.bias, random_input({DType::f32, {dirs, 2 * gates * c.hidden}}, "b", -0.5, 0.5));
  Tensor lens(c.lens_type, Shape{c.batch});
  for (size_t i = 0; i < c.lens.size(); ++i) lens.set(static_cast<int64_t>(i), static_cast<double>(c.lens[i]));
  add(!c.lens.empty(), lens);
  add(c.initial, random_input({DType::f32, state}, "h0"));
  if (c.type == "LSTM") add(c.initial, random_input({DType::f32, state}, "c0"));
  std::vector<TensorDesc> descs;
  for (const auto& v : in) descs.push_back(v.defined() ? v.desc() : TensorDesc{});
  Attributes a = c.attrs;
  a.set("direction", c.direction);
  a.set("layout", c.layout);
  a.set("hidden_size", c.hidden);
  OpSpec s = spec_of(c.type, descs, std::move(a));
  s.present = present;
  s.opset = 14;
  return {s, in};
}

void check(const RnnCase& c) {
  SCOPED_TRACE(fmt::format("{} {} layout {} lens [{}]", c.type, c.direction, c.layout, fmt::join(c.lens, ", ")));
  const auto [spec, in] = rnn_problem(c);
  // cuDNN sums in f32 (FMA, no TF32); the reference in double. Backpropagation through a few
  // steps stays within a few f32 ulps of values of order 1.
  expect_matches_reference(spec, in, "cuda", Tolerance{1e-4, 2e-5});
}

RnnCase gru() {
  RnnCase c;
  c.type = "GRU";
  c.attrs.set("linear_before_reset", int64_t{1});
  return c;
}

// The reason the CUDA backend gives for not taking the case ("accepts" when it takes it).
std::string cuda_answer(const OpSpec& s) {
  register_builtin_operators();
  const auto answers = OpRegistry::global().explain(s, "cuda");
  return answers.empty() ? "no cuda implementation" : answers.front().reason;
}

TEST(CudaRecurrent, LstmMatchesTheReference) {
  D5_REQUIRE_GPU();
  check({});
  RnnCase bare;
  bare.bias = false;
  bare.initial = false;
  check(bare);
}

TEST(CudaRecurrent, LstmInBothDirectionsAndReversed) {
  D5_REQUIRE_GPU();
  for (const char* direction : {"bidirectional", "reverse"})
    for (int64_t layout : {0, 1}) {
      RnnCase c;
      c.direction = direction;
      c.layout = layout;
      check(c);
    }
}

TEST(CudaRecurrent, SequenceLengthsWithInitialStatesAndEmptySequences) {
  D5_REQUIRE_GPU();
  for (const char* direction : {"forward", "reverse", "bidirectional"})
    for (int64_t layout : {0, 1}) {
      RnnCase c;
      c.direction = direction;
      c.layout = layout;
      c.lens = {5, 2, 0};
      check(c);
    }
  RnnCase wide;  // int64 lengths, all full: the plain path with a lengths input
  wide.lens = {5, 5, 5};
  wide.lens_type = DType::i64;
  check(wide);
}

TEST(CudaRecurrent, GruWithTheResetGateAfterTheProduct) {
  D5_REQUIRE_GPU();
  check(gru());
  for (const char* direction : {"bidirectional", "reverse"})
    for (int64_t layout : {0, 1}) {
      RnnCase c = gru();
      c.direction = direction;
      c.layout = layout;
      c.lens = {3, 5, 1};
      check(c);
    }
  RnnCase named = gru();
  named.attrs.set("activations", std::vector<std::string>{"sigmoid", "tanh"});
  check(named);
}

TEST(CudaRecurrent, RnnWithTanhAndRelu) {
  D5_REQUIRE_GPU();
  RnnCase tanh_case;
  tanh_case.type = "RNN";
  check(tanh_case);
  RnnCase relu = tanh_case;
  relu.direction = "bidirectional";
  relu.attrs.set("activations", std::vector<std::string>{"Relu", "Relu"});
  check(relu);
  relu.layout = 1;
  relu.lens = {4, 0, 5};
  check(relu);
}

TEST(CudaRecurrent, RefusesWhatCudnnCannotRunWithTheReason) {
  D5_REQUIRE_GPU();
  {
    RnnCase c;
    auto [s, in] = rnn_problem(c);
    s.inputs.push_back({DType::f32, Shape{1, 3 * c.hidden}});
    s.present.push_back(true);
    EXPECT_NE(cuda_answer(s).find("peephole"), std::string::npos) << cuda_answer(s);
  }
  RnnCase lbr0 = gru();
  lbr0.attrs.set("linear_before_reset", int64_t{0});
  EXPECT_NE(cuda_answer(rnn_problem(lbr0).first).find("linear_before_reset=0"), std::string::npos);
  RnnCase clip;
  clip.attrs.set("clip", 2.0);
  EXPECT_NE(cuda_answer(rnn_problem(clip).first).find("clip"), std::string::npos);
  RnnCase coupled;
  coupled.attrs.set("input_forget", int64_t{1});
  EXPECT_NE(cuda_answer(rnn_problem(coupled).first).find("input_forget"), std::string::npos);
  RnnCase mixed;
  mixed.type = "RNN";
  mixed.direction = "bidirectional";
  mixed.attrs.set("activations", std::vector<std::string>{"Tanh", "Relu"});
  EXPECT_NE(cuda_answer(rnn_problem(mixed).first).find("activations"), std::string::npos);
  RnnCase hard;
  hard.attrs.set("activations", std::vector<std::string>{"HardSigmoid", "Tanh", "Tanh"});
  EXPECT_NE(cuda_answer(rnn_problem(hard).first).find("activations"), std::string::npos);
}

// Every DeepBench RNN row runs on cuDNN (created, not run: d5 ops bench checks them).
TEST(CudaRecurrent, AcceptsEveryDeepBenchRow) {
  D5_REQUIRE_GPU();
  for (const char* suite : {"deepbench-rnn-training", "deepbench-rnn-inference-server", "deepbench-rnn-inference-device"})
    for (const Problem& p : load_suite(suite, 7)) EXPECT_EQ(cuda_answer(p.spec), "accepts") << suite << " " << p.name;
}

// d5 ops bench's gradient check on the small DeepBench rows (vanilla Relu RNNs, an LSTM).
TEST(CudaRecurrent, DeepBenchDeviceRowsPassTheGradientCheck) {
  D5_REQUIRE_GPU();
  register_builtin_operators();
  for (const Problem& p : load_suite("deepbench-rnn-inference-device", 7)) {
    ProblemContext ctx(p);
    OpBenchOptions o;
    o.mode = BenchMode::Grad;
    o.min_time = 1e-3;
    o.max_time = 0.2;
    const CaseResult c = bench_problem(ctx, "cuda", o);
    EXPECT_EQ(c.state, CaseState::Passed) << p.name << ": " << c.detail;
  }
}

// The zoo's LSTM node: Y_h only asked for (num_outputs 2, Y unnamed), no initial states.
TEST(CudaRecurrent, LstmWithFewerOutputs) {
  D5_REQUIRE_GPU();
  RnnCase c;
  c.initial = false;
  c.seq = 7;
  auto [s, in] = rnn_problem(c);
  s.num_outputs = 2;
  expect_matches_reference(s, in, "cuda", Tolerance{1e-4, 2e-5});
}

}  // namespace
}  // namespace d5::test
