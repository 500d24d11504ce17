// Suite files -> problems. Each row is validated completely here, so a bad row is reported with
// its file and line instead of surfacing later as an operator error deep inside a benchmark.
#include "deep500/op/suites.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <fmt/format.h>

#include "deep500/core/data_paths.h"
#include "deep500/core/error.h"
#include "deep500/core/rng.h"

#ifndef D5_SUITES_DIR_DEFAULT
#error "D5_SUITES_DIR_DEFAULT must name the source tree's suites/ directory"
#endif

namespace d5 {

namespace {

namespace fs = std::filesystem;

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> split_fields(std::string_view line) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (true) {
    const size_t comma = line.find(',', start);
    out.push_back(trim(line.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start)));
    if (comma == std::string_view::npos) return out;
    start = comma + 1;
  }
}

// One data row with its location, for messages.
struct Row {
  std::string_view source;
  int64_t line;
  const std::vector<std::string>* columns;
  std::vector<std::string_view> fields;

  [[noreturn]] void fail(const std::string& what) const {
    D5_THROW(FormatError, "{}:{}: {}", source, line, what);
  }
  int64_t integer(size_t i, int64_t min) const {
    const std::string_view f = fields[i];
    int64_t v = 0;
    const auto [end, ec] = std::from_chars(f.data(), f.data() + f.size(), v);
    if (f.empty() || ec != std::errc() || end != f.data() + f.size())
      fail(fmt::format("column '{}' is '{}', not an integer", (*columns)[i], f));
    // 2^31 keeps every product of sizes below int64 overflow and matches what DeepBench's int
    // fields could hold.
    if (v < min || v > (int64_t{1} << 31))
      fail(fmt::format("column '{}' is {}, outside [{}, 2^31]", (*columns)[i], v, min));
    return v;
  }
  bool flag(size_t i) const {
    const std::string_view f = fields[i];
    if (f != "0" && f != "1") fail(fmt::format("column '{}' is '{}', expected 0 or 1", (*columns)[i], f));
    return f == "1";
  }
};

TensorDesc f32(std::vector<int64_t> dims) { return TensorDesc{DType::f32, Shape(std::move(dims)), Layout::any}; }

int64_t bytes_of(const std::vector<TensorDesc>& ds) {
  int64_t b = 0;
  for (const auto& d : ds) b += static_cast<int64_t>(d.bytes());
  return b;
}

// C[m, n] = op(A) op(B): A is stored [k, m] when transposed, B [n, k].
void gemm_problem(const Row& r, Problem& p) {
  const int64_t m = r.integer(0, 1), n = r.integer(1, 1), k = r.integer(2, 1);
  const bool ta = r.flag(3), tb = r.flag(4);
  p.params = {{"m", m}, {"n", n}, {"k", k}, {"a_t", ta ? 1 : 0}, {"b_t", tb ? 1 : 0}};
  p.name = fmt::format("m{}n{}k{}_{}{}", m, n, k, ta ? 'T' : 'N', tb ? 'T' : 'N');
  p.spec.type = "Gemm";
  p.spec.inputs = {f32(ta ? std::vector{k, m} : std::vector{m, k}), f32(tb ? std::vector{n, k} : std::vector{k, n})};
  p.spec.attrs.set("transA", int64_t{ta});
  p.spec.attrs.set("transB", int64_t{tb});
  p.input_scale = {1, 1};
  p.forward_reduction = k;
  p.backward_reduction = std::max(m, n);  // dA sums over n, dB over m
  p.tensor_bytes = bytes_of(p.spec.inputs) + bytes_of({f32({m, n})});
}

// X[n, c, h, w] conv W[k, c, filter_h, filter_w]; ONNX pads are [begin_h, begin_w, end_h, end_w].
void conv_problem(const Row& r, Problem& p) {
  const int64_t w = r.integer(0, 1), h = r.integer(1, 1), c = r.integer(2, 1), n = r.integer(3, 1),
                k = r.integer(4, 1), fw = r.integer(5, 1), fh = r.integer(6, 1), pw = r.integer(7, 0),
                ph = r.integer(8, 0), sw = r.integer(9, 1), sh = r.integer(10, 1);
  if (h + 2 * ph < fh || w + 2 * pw < fw)
    r.fail(fmt::format("the {}x{} filter (h x w) does not fit the padded {}x{} input", fh, fw, h + 2 * ph,
                       w + 2 * pw));
  const int64_t oh = (h + 2 * ph - fh) / sh + 1, ow = (w + 2 * pw - fw) / sw + 1;
  p.params = {{"w", w},  {"h", h},  {"c", c},  {"n", n},   {"k", k},   {"filter_w", fw},
              {"filter_h", fh}, {"pad_w", pw}, {"pad_h", ph}, {"wstride", sw}, {"hstride", sh}};
  p.name = fmt::format("mb{}ic{}ih{}iw{}oc{}kh{}kw{}sh{}sw{}ph{}pw{}", n, c, h, w, k, fh, fw, sh, sw, ph, pw);
  p.spec.type = "Conv";
  p.spec.inputs = {f32({n, c, h, w}), f32({k, c, fh, fw})};
  p.spec.attrs.set("kernel_shape", std::vector<int64_t>{fh, fw});
  p.spec.attrs.set("pads", std::vector<int64_t>{ph, pw, ph, pw});
  p.spec.attrs.set("strides", std::vector<int64_t>{sh, sw});
  p.input_scale = {1, 1};
  p.forward_reduction = c * fh * fw;
  // dW sums over every output position of every image; dX over the filters touching a pixel.
  p.backward_reduction = std::max(n * oh * ow, k * fh * fw);
  p.tensor_bytes = bytes_of(p.spec.inputs) + bytes_of({f32({n, k, oh, ow})});
}

// DeepBench runs cuDNN with CUDNN_SKIP_INPUT: the input is added to the gates without an input
// matrix, so it must have `hidden` features. ONNX has no such mode, so here the input size is
// `hidden` and an input matrix W is multiplied as well (about twice DeepBench's work per step).
// 'vanilla' is cuDNN's CUDNN_RNN_RELU, hence Relu; GRU uses linear_before_reset = 1, cuDNN's
// (and PyTorch's) formulation.
void rnn_problem(const Row& r, Problem& p) {
  const int64_t hidden = r.integer(0, 1), batch = r.integer(1, 1), steps = r.integer(2, 1);
  const std::string_view type = r.fields[3];
  int64_t gates = 0;
  if (type == "vanilla") {
    p.spec.type = "RNN";
    gates = 1;
    p.spec.attrs.set("activations", std::vector<std::string>{"Relu"});
  } else if (type == "lstm") {
    p.spec.type = "LSTM";
    gates = 4;
  } else if (type == "gru") {
    p.spec.type = "GRU";
    gates = 3;
    p.spec.attrs.set("linear_before_reset", int64_t{1});
  } else {
    r.fail(fmt::format("column 'type' is '{}', expected vanilla, lstm or gru", type));
  }
  p.params = {{"hidden", hidden}, {"batch", batch}, {"time_steps", steps}, {"type", std::string(type)}};
  p.name = fmt::format("{}_h{}mb{}t{}", type, hidden, batch, steps);
  p.spec.attrs.set("hidden_size", hidden);
  p.spec.inputs = {f32({steps, batch, hidden}), f32({1, gates * hidden, hidden}), f32({1, gates * hidden, hidden}),
                   f32({1, 2 * gates * hidden})};
  // Weights in [-1/sqrt(hidden), 1/sqrt(hidden)) (PyTorch's initialization) keep the recurrence
  // from blowing up over many steps, ReLU included: the spectral radius of R is then about 0.6.
  const double w = 1.0 / std::sqrt(static_cast<double>(hidden));
  p.input_scale = {1, w, w, w};
  // A step sums 2*hidden products. An error carried into the next step is multiplied by R (norm
  // about 1.2 at this scale) and a gate derivative (<= 1), so it adds to, but does not compound
  // over, the steps' own errors: 4x one step's sums covers it. dW sums over steps x batch.
  p.forward_reduction = 8 * hidden;
  p.backward_reduction = std::max(steps * batch, 8 * hidden);
  std::vector<TensorDesc> outs = {f32({steps, 1, batch, hidden}), f32({1, batch, hidden})};
  if (gates == 4) outs.push_back(f32({1, batch, hidden}));
  p.tensor_bytes = bytes_of(p.spec.inputs) + bytes_of(outs);
}

struct Kind {
  std::vector<std::string> columns;
  void (*make)(const Row&, Problem&);
};

const std::vector<Kind>& kinds() {
  static const std::vector<Kind> k = {
      {{"m", "n", "k", "a_t", "b_t"}, gemm_problem},
      {{"w", "h", "c", "n", "k", "filter_w", "filter_h", "pad_w", "pad_h", "wstride", "hstride"}, conv_problem},
      {{"hidden", "batch", "time_steps", "type"}, rnn_problem},
  };
  return k;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  D5_CHECK(in.good(), IoError, "cannot read suite file '{}': {}", path, std::strerror(errno));
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

std::vector<Problem> parse_suite(std::string_view text, const std::string& source, const std::string& suite_name,
                                 uint64_t seed) {
  const Kind* kind = nullptr;
  std::vector<Problem> problems;
  int64_t line_no = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t eol = text.find('\n', pos);
    const std::string_view line = trim(text.substr(pos, eol == std::string_view::npos ? std::string_view::npos : eol - pos));
    pos = eol == std::string_view::npos ? text.size() : eol + 1;
    ++line_no;
    if (line.empty() || line.front() == '#') continue;
    const auto fields = split_fields(line);
    if (!kind) {
      for (const auto& k : kinds())
        if (std::equal(fields.begin(), fields.end(), k.columns.begin(), k.columns.end())) kind = &k;
      if (!kind) {
        std::vector<std::string> known;
        for (const auto& k : kinds()) known.push_back(fmt::format("'{}'", fmt::join(k.columns, ",")));
        D5_THROW(FormatError, "{}:{}: header '{}' is none of the known suite headers: {}", source, line_no, line,
                 fmt::join(known, ", "));
      }
      continue;
    }
    Row row{source, line_no, &kind->columns, fields};
    if (fields.size() != kind->columns.size())
      row.fail(fmt::format("expected {} fields ({}), got {}", kind->columns.size(), fmt::join(kind->columns, ","),
                           fields.size()));
    Problem p;
    p.suite = suite_name;
    p.row = static_cast<int64_t>(problems.size()) + 1;
    p.line = line_no;
    kind->make(row, p);
    p.params["row"] = p.row;
    p.name = fmt::format("#{} {}", p.row, p.name);
    p.spec.name = p.name;
    p.seed = seed;
    p.stream = fmt::format("{}#{}", suite_name, p.row);
    problems.push_back(std::move(p));
  }
  D5_CHECK(kind, FormatError, "{}: empty suite file: no header line", source);
  return problems;
}

std::vector<Problem> load_suite_file(const std::string& path, const std::string& suite_name, uint64_t seed) {
  return parse_suite(read_file(path), path, suite_name, seed);
}

std::string suites_directory() {
  return locate_data("D5_SUITES_DIR", D5_SUITES_DIR_DEFAULT, "share/deep500/suites");
}

std::vector<SuiteInfo> available_suites() {
  const fs::path root = suites_directory();
  std::vector<SuiteInfo> out;
  auto add = [&](const fs::path& file, const std::string& prefix) {
    if (file.extension() != ".csv" || !fs::is_regular_file(file)) return;
    std::string name = prefix + file.stem().string();
    std::replace(name.begin(), name.end(), '_', '-');
    out.push_back({name, file.string()});
  };
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(root, ec)) {
    if (e.is_directory()) {
      for (const auto& f : fs::directory_iterator(e.path(), ec)) add(f.path(), e.path().filename().string() + "-");
    } else {
      add(e.path(), "");
    }
  }
  std::sort(out.begin(), out.end(), [](const SuiteInfo& a, const SuiteInfo& b) { return a.name < b.name; });
  return out;
}

std::vector<Problem> load_suite(const std::string& name, uint64_t seed) {
  const auto suites = available_suites();
  for (const auto& s : suites)
    if (s.name == name) return load_suite_file(s.path, name, seed);
  std::vector<std::string> names;
  for (const auto& s : suites) names.push_back(s.name);
  D5_THROW(InvalidArgument, "unknown suite '{}'; available in {}: {}", name, suites_directory(),
           names.empty() ? "none" : fmt::format("{}", fmt::join(names, ", ")));
}

Problem in_dtype(Problem p, DType t) {
  D5_CHECK_ARG(t == DType::f32 || t == DType::f16 || t == DType::bf16,
               "suite problems run in f32, f16 or bf16, not {}", to_string(t));
  if (t == DType::f32) return p;
  for (auto& d : p.spec.inputs)
    if (d.dtype == DType::f32) d.dtype = t;
  // Outputs follow the inputs' dtype in every suite operator: scale the whole count alike.
  p.tensor_bytes = p.tensor_bytes * static_cast<int64_t>(dtype_size(t)) / 4;
  p.params["dtype"] = std::string(to_string(t));
  return p;
}

std::vector<Tensor> generate_inputs(const Problem& p) {
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < p.spec.inputs.size(); ++i) {
    const DType want = p.spec.inputs[i].dtype;
    // f16 and bf16 inputs are the f32 ones rounded (in_dtype), so precisions compare on one draw.
    const bool narrowed = want == DType::f16 || want == DType::bf16;
    Tensor t = Tensor::uninitialized(narrowed ? TensorDesc{DType::f32, p.spec.inputs[i].shape} : p.spec.inputs[i]);
    RngStream r(p.seed, fmt::format("{}/input{}", p.stream, i));
    const double scale = i < p.input_scale.size() ? p.input_scale[i] : 1.0;
    if (t.dtype() == DType::f32) {  // the suites' dtype; the generic path costs 5x more per element
      for (float& v : t.span<float>()) v = (2 * r.uniform_float() - 1) * static_cast<float>(scale);
      if (narrowed) t = t.cast(want);
    } else {
      for (int64_t k = 0; k < t.numel(); ++k) t.set(k, (2 * r.uniform() - 1) * scale);
    }
    inputs.push_back(std::move(t));
  }
  return inputs;
}

Tensor generate_upstream_gradient(const Problem& p, size_t k, const TensorDesc& desc) {
  Tensor t = Tensor::uninitialized(desc);
  RngStream r(p.seed, fmt::format("{}/upstream{}", p.stream, k));
  for (int64_t i = 0; i < t.numel(); ++i) t.set(i, 2 * r.uniform() - 1);
  return t;
}

}  // namespace d5
