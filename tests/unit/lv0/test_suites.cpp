// Suite loader: rows -> OpSpec values, errors naming file and line, suite discovery.
#include <gtest/gtest.h>

#include <cstdlib>

#include "deep500/core/error.h"
#include "deep500/op/suites.h"

namespace d5::test {

namespace {

std::vector<int64_t> dims(const TensorDesc& d) { return d.shape.dims(); }

Problem one(const std::string& csv) {
  const auto ps = parse_suite(csv, "t.csv", "unit", 7);
  EXPECT_EQ(ps.size(), 1u);
  return ps.at(0);
}

// The message of the FormatError thrown by parsing `csv`, or "" when none is thrown.
std::string format_error(const std::string& csv) {
  try {
    parse_suite(csv, "bad.csv", "unit", 0);
  } catch (const FormatError& e) {
    return e.what();
  }
  return "";
}

// Points $D5_SUITES_DIR somewhere for the life of the object.
struct SuitesDir {
  explicit SuitesDir(const std::string& dir) { setenv("D5_SUITES_DIR", dir.c_str(), 1); }
  ~SuitesDir() { unsetenv("D5_SUITES_DIR"); }
};

}  // namespace

TEST(Suites, GemmRowsBecomeGemmWithTransposedStorage) {
  // C[m=7, n=5] = A^T B with k = 9: A is stored [k, m], B [k, n].
  const Problem p = one("m,n,k,a_t,b_t\n7,5,9,1,0\n");
  EXPECT_EQ(p.spec.type, "Gemm");
  ASSERT_EQ(p.spec.inputs.size(), 2u);
  EXPECT_EQ(dims(p.spec.inputs[0]), (std::vector<int64_t>{9, 7}));
  EXPECT_EQ(dims(p.spec.inputs[1]), (std::vector<int64_t>{9, 5}));
  EXPECT_EQ(p.spec.inputs[0].dtype, DType::f32);
  EXPECT_EQ(p.spec.attrs.get_int("transA"), 1);
  EXPECT_EQ(p.spec.attrs.get_int("transB"), 0);
  EXPECT_EQ(p.forward_reduction, 9);
  EXPECT_EQ(p.backward_reduction, 7);
  EXPECT_EQ(p.tensor_bytes, 4 * (9 * 7 + 9 * 5 + 7 * 5));
  EXPECT_EQ(p.name, "#1 m7n5k9_TN");
  EXPECT_EQ(p.params["m"], 7);
  EXPECT_EQ(p.params["a_t"], 1);
  EXPECT_EQ(p.params["row"], 1);
  EXPECT_EQ(p.seed, 7u);
  EXPECT_EQ(p.stream, "unit#1");

  const Problem q = one("m,n,k,a_t,b_t\n7,5,9,0,1\n");  // B^T: B stored [n, k]
  EXPECT_EQ(dims(q.spec.inputs[0]), (std::vector<int64_t>{7, 9}));
  EXPECT_EQ(dims(q.spec.inputs[1]), (std::vector<int64_t>{5, 9}));
  EXPECT_EQ(q.spec.attrs.get_int("transB"), 1);
}

TEST(Suites, ConvRowsKeepWidthAndHeightApart) {
  // Every w/h pair differs, so a swap anywhere shows: w=9 h=7 c=3 n=2 k=4, filter 3 wide 2 high,
  // pad_w 1 pad_h 0, wstride 2 hstride 1.
  const Problem p = one("w,h,c,n,k,filter_w,filter_h,pad_w,pad_h,wstride,hstride\n9,7,3,2,4,3,2,1,0,2,1\n");
  EXPECT_EQ(p.spec.type, "Conv");
  EXPECT_EQ(dims(p.spec.inputs[0]), (std::vector<int64_t>{2, 3, 7, 9}));  // X[n, c, h, w]
  EXPECT_EQ(dims(p.spec.inputs[1]), (std::vector<int64_t>{4, 3, 2, 3}));  // W[k, c, fh, fw]
  EXPECT_EQ(p.spec.attrs.get_ints("kernel_shape"), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(p.spec.attrs.get_ints("pads"), (std::vector<int64_t>{0, 1, 0, 1}));
  EXPECT_EQ(p.spec.attrs.get_ints("strides"), (std::vector<int64_t>{1, 2}));
  // Output: oh = (7 - 2)/1 + 1 = 6, ow = (9 + 2 - 3)/2 + 1 = 5.
  EXPECT_EQ(p.tensor_bytes, 4 * (2 * 3 * 7 * 9 + 4 * 3 * 2 * 3 + 2 * 4 * 6 * 5));
  EXPECT_EQ(p.forward_reduction, 3 * 2 * 3);
  EXPECT_EQ(p.backward_reduction, 2 * 6 * 5);
  EXPECT_EQ(p.name, "#1 mb2ic3ih7iw9oc4kh2kw3sh1sw2ph0pw1");
  EXPECT_EQ(p.params["filter_w"], 3);
  EXPECT_EQ(p.params["hstride"], 1);
}

TEST(Suites, RnnRowsFollowDeepBenchCellTypes) {
  const auto ps = parse_suite("hidden,batch,time_steps,type\n4,2,3,vanilla\n5,2,3,lstm\n3,3,4,gru\n", "t.csv", "u", 1);
  ASSERT_EQ(ps.size(), 3u);
  // vanilla is cuDNN's ReLU RNN; input size = hidden.
  EXPECT_EQ(ps[0].spec.type, "RNN");
  EXPECT_EQ(ps[0].spec.attrs.get_strings("activations"), (std::vector<std::string>{"Relu"}));
  EXPECT_EQ(dims(ps[0].spec.inputs[0]), (std::vector<int64_t>{3, 2, 4}));  // X[T, batch, input = hidden]
  EXPECT_EQ(dims(ps[0].spec.inputs[1]), (std::vector<int64_t>{1, 4, 4}));
  EXPECT_EQ(ps[0].spec.attrs.get_int("hidden_size"), 4);
  EXPECT_EQ(ps[1].spec.type, "LSTM");
  EXPECT_EQ(dims(ps[1].spec.inputs[1]), (std::vector<int64_t>{1, 20, 5}));  // W[1, 4h, input]
  EXPECT_EQ(dims(ps[1].spec.inputs[2]), (std::vector<int64_t>{1, 20, 5}));  // R[1, 4h, h]
  EXPECT_EQ(dims(ps[1].spec.inputs[3]), (std::vector<int64_t>{1, 40}));     // B[1, 8h]
  EXPECT_EQ(ps[2].spec.type, "GRU");
  EXPECT_EQ(ps[2].spec.attrs.get_int("linear_before_reset"), 1);
  EXPECT_EQ(dims(ps[2].spec.inputs[1]), (std::vector<int64_t>{1, 9, 3}));
  EXPECT_EQ(ps[2].row, 3);
  EXPECT_EQ(ps[2].line, 4);
  EXPECT_EQ(ps[2].name, "#3 gru_h3mb3t4");
}

TEST(Suites, CommentsAndBlankLinesAreSkippedButCounted) {
  const auto ps = parse_suite("# sizes\nm,n,k,a_t,b_t\n\n# a comment\n2,3,4,0,0\r\n", "t.csv", "u", 0);
  ASSERT_EQ(ps.size(), 1u);
  EXPECT_EQ(ps[0].line, 5);
  EXPECT_EQ(ps[0].row, 1);
}

TEST(Suites, MalformedRowsNameFileAndLine) {
  EXPECT_NE(format_error("m,n,k,a_t,b_t\n1,2,3,0,0\n4,5,6,0\n").find("bad.csv:3: expected 5 fields"), std::string::npos);
  EXPECT_NE(format_error("m,n,k,a_t,b_t\n1,2,x3,0,0\n").find("bad.csv:2: column 'k' is 'x3', not an integer"),
            std::string::npos);
  EXPECT_NE(format_error("m,n,k,a_t,b_t\n1,2,3,2,0\n").find("bad.csv:2: column 'a_t' is '2', expected 0 or 1"),
            std::string::npos);
  EXPECT_NE(format_error("m,n,k,a_t,b_t\n0,2,3,0,0\n").find("bad.csv:2: column 'm' is 0"), std::string::npos);
  EXPECT_NE(format_error("m,n,k,a_t,b_t\n1,2,,0,0\n").find("bad.csv:2: column 'k' is ''"), std::string::npos);
  EXPECT_NE(format_error("hidden,batch,time_steps,type\n8,1,2,transformer\n").find("bad.csv:2: column 'type'"),
            std::string::npos);
  EXPECT_NE(format_error("w,h,c,n,k,filter_w,filter_h,pad_w,pad_h,wstride,hstride\n4,4,1,1,1,7,3,1,1,1,1\n")
                .find("bad.csv:2: the 3x7 filter"),
            std::string::npos);
  EXPECT_NE(format_error("w,h,c,n,k,filter_w,filter_h,pad_w,pad_h,wstride,hstride\n4,4,1,1,1,3,3,-1,1,1,1\n")
                .find("bad.csv:2: column 'pad_w' is -1"),
            std::string::npos);
  EXPECT_NE(format_error("\n\nm,n,k\n1,2,3\n").find("bad.csv:3: header 'm,n,k'"), std::string::npos);
  EXPECT_NE(format_error("# nothing\n").find("bad.csv: empty suite file"), std::string::npos);
}

TEST(Suites, MissingFileIsAnIoError) {
  EXPECT_THROW(load_suite_file("/nonexistent/suite.csv", "x", 0), IoError);
}

TEST(Suites, DeepBenchSuitesAreFoundInTheSourceTree) {
  unsetenv("D5_SUITES_DIR");
  EXPECT_EQ(suites_directory(), D5_SOURCE_DIR "/suites");
  const std::map<std::string, size_t> rows = {
      {"deepbench-gemm-training", 160}, {"deepbench-gemm-inference-server", 75}, {"deepbench-gemm-inference-device", 13},
      {"deepbench-conv-training", 94},  {"deepbench-conv-inference-server", 107}, {"deepbench-conv-inference-device", 16},
      {"deepbench-rnn-training", 53},   {"deepbench-rnn-inference-server", 69},   {"deepbench-rnn-inference-device", 3}};
  std::vector<std::string> names;
  for (const auto& s : available_suites()) names.push_back(s.name);
  for (const auto& [name, n] : rows) {
    EXPECT_NE(std::find(names.begin(), names.end(), name), names.end()) << name;
    EXPECT_EQ(load_suite(name, 0).size(), n) << name;
  }
  // The first training GEMM of DeepBench: 1760 x 16 x 1760, no transposes.
  const Problem first = load_suite("deepbench-gemm-training", 0).front();
  EXPECT_EQ(first.name, "#1 m1760n16k1760_NN");
}

TEST(Suites, UnknownSuiteListsTheAvailableOnes) {
  unsetenv("D5_SUITES_DIR");
  try {
    load_suite("deepbench-nope", 0);
    FAIL() << "no error";
  } catch (const InvalidArgument& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("unknown suite 'deepbench-nope'"), std::string::npos) << m;
    EXPECT_NE(m.find("deepbench-conv-training"), std::string::npos) << m;
  }
}

TEST(Suites, EnvironmentVariableReplacesTheDirectory) {
  SuitesDir dir(D5_SOURCE_DIR "/tests/data/suites");
  std::vector<std::string> names;
  for (const auto& s : available_suites()) names.push_back(s.name);
  EXPECT_EQ(names, (std::vector<std::string>{"tiny-conv-small", "tiny-gemm-small", "tiny-rnn-small"}));
  EXPECT_EQ(load_suite("tiny-gemm-small", 0).size(), 4u);
}

TEST(Suites, InputsAreReproducibleAndScaled) {
  const auto ps = parse_suite("hidden,batch,time_steps,type\n16,2,3,lstm\n16,2,3,lstm\n", "t.csv", "u", 99);
  const auto a = generate_inputs(ps[0]), b = generate_inputs(ps[0]), other = generate_inputs(ps[1]);
  ASSERT_EQ(a.size(), 4u);
  EXPECT_TRUE(allclose(a[0], b[0], 0, 0));
  EXPECT_FALSE(allclose(a[0], other[0], 0, 0));  // another row, another stream
  // X in [-1, 1); weights in [-1/sqrt(16), 1/sqrt(16)) = [-0.25, 0.25).
  double max_x = 0, max_w = 0;
  for (int64_t i = 0; i < a[0].numel(); ++i) max_x = std::max(max_x, std::abs(a[0].get(i)));
  for (int64_t i = 0; i < a[1].numel(); ++i) max_w = std::max(max_w, std::abs(a[1].get(i)));
  EXPECT_LE(max_x, 1.0);
  EXPECT_GT(max_x, 0.5);
  EXPECT_LE(max_w, 0.25);
  EXPECT_GT(max_w, 0.125);
}

// --dtype: the same problem in f16 or bf16 reads the f32 draws rounded, holds half the bytes and
// says its dtype; other dtypes are refused.
TEST(Suites, InDtypeNarrowsTheInputsOfTheSameDraw) {
  const Problem p = one("m,n,k,a_t,b_t\n8,4,16,0,1\n");
  const auto wide = generate_inputs(p);
  for (DType t : {DType::f16, DType::bf16}) {
    const Problem q = in_dtype(p, t);
    EXPECT_EQ(q.spec.inputs[0].dtype, t);
    EXPECT_EQ(q.spec.inputs[1].dtype, t);
    EXPECT_EQ(q.tensor_bytes * 2, p.tensor_bytes);
    EXPECT_EQ(q.params["dtype"], std::string(to_string(t)));
    const auto narrow = generate_inputs(q);
    ASSERT_EQ(narrow.size(), wide.size());
    for (size_t i = 0; i < wide.size(); ++i) {
      ASSERT_EQ(narrow[i].dtype(), t);
      const Tensor rounded = wide[i].cast(t);
      for (int64_t k = 0; k < wide[i].numel(); ++k) ASSERT_EQ(narrow[i].get(k), rounded.get(k)) << i << " " << k;
    }
  }
  const Problem same = in_dtype(p, DType::f32);
  EXPECT_EQ(same.spec.inputs[0].dtype, DType::f32);
  EXPECT_FALSE(same.params.contains("dtype"));
  EXPECT_THROW(in_dtype(p, DType::i32), InvalidArgument);
}

}  // namespace d5::test
