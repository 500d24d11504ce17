// Compiling custom operators at test time (cmake and a C++ compiler are part of the build
// requirements). Every library is built once per run into a fresh cache and shared by the tests.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstddef>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "custom_op_test_cache.h"
#include "deep500/op/custom_op.h"
#include "deep500/op/custom_op_compiler.h"
#include "deep500/op/op_registry.h"
#include "deep500/op/validation.h"

extern "C" int d5_test_c_tensor_size(void);
extern "C" int d5_test_c_tensor_data_offset(void);
extern "C" int d5_test_c_abi_version(void);

namespace d5 {
namespace {

namespace fs = std::filesystem;

const fs::path& test_cache() { return test::custom_op_test_cache(); }

// Warnings are errors here, so the header and the example stay clean for users who enable them.
CustomOpOptions options(const std::string& subdir = "") {
  CustomOpOptions o;
  o.cache_dir = test_cache() / subdir;
  o.register_op = false;
  o.compile_options = {"-Wall", "-Wextra", "-Wpedantic", "-Werror"};
  return o;
}

fs::path example() { return fs::path(D5_SOURCE_DIR) / "examples" / "median_pooling" / "median_pool.cpp"; }
fs::path test_source(const char* name) {
  return fs::path(D5_SOURCE_DIR) / "tests" / "unit" / "custom" / "sources" / name;
}

const std::map<std::string, std::string> kMedian3{{"KERNEL_SIZE", "3"}, {"STRIDE", "1"}};
const std::map<std::string, std::string> kMedian2{{"KERNEL_SIZE", "2"}, {"STRIDE", "2"}};

const CustomOpBuild& median3() {
  static const CustomOpBuild b = build_custom_op("MedianPool", {example()}, kMedian3, options());
  return b;
}
const CustomOpBuild& median2() {
  static const CustomOpBuild b = build_custom_op("MedianPool", {example()}, kMedian2, options());
  return b;
}
const CustomOpBuild& throwing() {
  static const CustomOpBuild b = build_custom_op("Throwing", {test_source("throwing_op.cpp")}, {}, options());
  return b;
}

std::unique_ptr<Operator> create(const CustomOpBuild& b, const std::string& type, TensorDesc in,
                                 TensorDesc out) {
  OpSpec s;
  s.type = type;
  s.inputs = {in};
  return b.library->create(s, {out});
}

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return fmt::format("{}: {}", to_string(e.kind()), e.what());
  }
  return "(no exception)";
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// Distinct values, so every window has a unique median:
//    5  1  9  3
//    7  2  8  6
//    4 12  0 11
//   10 13 15 14
Tensor grid(DType t) {
  const double v[] = {5, 1, 9, 3, 7, 2, 8, 6, 4, 12, 0, 11, 10, 13, 15, 14};
  Tensor x(t, Shape{1, 1, 4, 4});
  for (int64_t i = 0; i < 16; ++i) x.set(i, v[i]);
  return x;
}

std::vector<double> values(const Tensor& t) {
  std::vector<double> v;
  for (int64_t i = 0; i < t.numel(); ++i) v.push_back(t.get(i));
  return v;
}

TEST(CustomOpAbi, CHeaderHasTheSameLayoutInC) {
  EXPECT_EQ(d5_test_c_tensor_size(), static_cast<int>(sizeof(d5_tensor)));
  EXPECT_EQ(d5_test_c_tensor_data_offset(), static_cast<int>(offsetof(d5_tensor, data)));
  EXPECT_EQ(d5_test_c_abi_version(), D5_CUSTOM_OP_ABI_VERSION);
}

TEST(CustomOpCompiler, MedianPoolForwardByHand) {
  // 3x3 windows, stride 1, on the grid above:
  //   rows 0-2, cols 0-2: {5 1 9 7 2 8 4 12 0}   -> sorted 0 1 2 4 [5] 7 8 9 12
  //   rows 0-2, cols 1-3: {1 9 3 2 8 6 12 0 11}  -> 0 1 2 3 [6] 8 9 11 12
  //   rows 1-3, cols 0-2: {7 2 8 4 12 0 10 13 15} -> 0 2 4 7 [8] 10 12 13 15
  //   rows 1-3, cols 1-3: {2 8 6 12 0 11 13 15 14} -> 0 2 6 8 [11] 12 13 14 15
  for (DType t : {DType::f32, DType::f64}) {
    auto op = create(median3(), "MedianPool", {t, Shape{1, 1, 4, 4}}, {t, Shape{1, 1, 2, 2}});
    const Tensor x = grid(t);
    const auto y = op->run_forward(std::span(&x, 1));
    EXPECT_EQ(values(y[0]), (std::vector<double>{5, 6, 8, 11})) << to_string(t);

    // Each output's gradient lands on its median: 5 at flat 0, 6 at 7, 8 at 6, 11 at 11.
    Tensor gy(t, Shape{1, 1, 2, 2});
    for (int64_t i = 0; i < 4; ++i) gy.set(i, static_cast<double>(i + 1));
    const auto gx = op->run_backward(std::span(&gy, 1), std::span(&x, 1), y);
    std::vector<double> expect(16, 0.0);
    expect[0] = 1, expect[7] = 2, expect[6] = 3, expect[11] = 4;
    EXPECT_EQ(values(gx[0]), expect) << to_string(t);
  }
  EXPECT_TRUE(
      contains(create(median3(), "MedianPool", {DType::f32, Shape{1, 1, 4, 4}}, {DType::f32, Shape{1, 1, 2, 2}})
                   ->implementation(),
               "custom:libMedianPool.so"));
}

TEST(CustomOpCompiler, EvenWindowTakesTheLowerMedianAndDefinitionsChangeTheKey) {
  // 2x2 windows, stride 2: {5 1 7 2} -> 1 [2] 5 7; {9 3 8 6} -> 3 [6] 8 9; {4 12 10 13} -> 4 [10] 12 13;
  // {0 11 15 14} -> 0 [11] 14 15.
  EXPECT_FALSE(median2().cache_hit);
  EXPECT_NE(median2().key, median3().key);
  EXPECT_NE(median2().directory, median3().directory);
  auto op = create(median2(), "MedianPool", {DType::f64, Shape{1, 1, 4, 4}}, {DType::f64, Shape{1, 1, 2, 2}});
  const Tensor x = grid(DType::f64);
  EXPECT_EQ(values(op->run_forward(std::span(&x, 1))[0]), (std::vector<double>{2, 6, 10, 11}));
}

TEST(CustomOpCompiler, MedianPoolTiesSendTheGradientToTheFirstElement) {
  // 3x3 input of ones but the centre: every value is the median 1; the first (flat 0) gets it.
  auto op = create(median3(), "MedianPool", {DType::f64, Shape{1, 1, 3, 3}}, {DType::f64, Shape{1, 1, 1, 1}});
  Tensor x(DType::f64, Shape{1, 1, 3, 3});
  x.fill(1);
  x.set(4, 7);
  const auto y = op->run_forward(std::span(&x, 1));
  EXPECT_EQ(y[0].get(0), 1);
  Tensor gy(DType::f64, Shape{1, 1, 1, 1});
  gy.set(0, 2.5);
  const auto gx = op->run_backward(std::span(&gy, 1), std::span(&x, 1), y);
  EXPECT_EQ(values(gx[0]), (std::vector<double>{2.5, 0, 0, 0, 0, 0, 0, 0, 0}));
}

TEST(CustomOpCompiler, MedianPoolPassesTheGradientCheck) {
  // Random values are distinct, so medians are unique; overlapping windows accumulate.
  auto op = create(median3(), "MedianPool", {DType::f64, Shape{2, 3, 6, 7}}, {DType::f64, Shape{2, 3, 4, 5}});
  Tensor x(DType::f64, Shape{2, 3, 6, 7});
  uint64_t state = 12345;
  for (int64_t i = 0; i < x.numel(); ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    x.set(i, static_cast<double>(state >> 11) / 9007199254740992.0 * 2 - 1);
  }
  const auto r = test_gradient(*op, std::vector<Tensor>{x});
  EXPECT_EQ(r.state, CaseState::Passed) << r.detail;
  EXPECT_GT(r.checked, 100);
}

TEST(CustomOpCompiler, MedianPoolRefusesWrongProblemsWithItsMessage) {
  const std::string m = message_of([] {
    create(median3(), "MedianPool", {DType::f64, Shape{1, 4, 4}}, {DType::f64, Shape{1, 2, 2}});
  });
  EXPECT_TRUE(contains(m, "InvalidArgument")) << m;
  EXPECT_TRUE(contains(m, "input must be NCHW (rank 4), got f64[1, 4, 4]")) << m;
  const std::string o = message_of([] {
    create(median3(), "MedianPool", {DType::f64, Shape{1, 1, 4, 4}}, {DType::f64, Shape{1, 1, 3, 3}});
  });
  EXPECT_TRUE(contains(o, "output must be f64[1, 1, 2, 2], got f64[1, 1, 3, 3]")) << o;
}

TEST(CustomOpCompiler, SecondCompileIsACacheHit) {
  const CustomOpBuild& first = median3();
  EXPECT_FALSE(first.cache_hit);  // a fresh cache: the first call built it
  const int64_t builds = custom_op_builds();
  const auto log_time = fs::last_write_time(first.build_log);
  const auto again = build_custom_op("MedianPool", {example()}, kMedian3, options());
  EXPECT_TRUE(again.cache_hit);
  EXPECT_EQ(custom_op_builds(), builds);
  EXPECT_EQ(again.key, first.key);
  EXPECT_EQ(fs::last_write_time(first.build_log), log_time);
  EXPECT_EQ(first.key.size(), 64u);
  EXPECT_TRUE(contains(first.directory.filename().string(), first.key));
}

TEST(CustomOpCompiler, CompileRegistersTheOperatorOnEveryBackend) {
  CustomOpOptions o = options();
  o.register_op = true;
  const TensorDesc in{DType::f32, Shape{1, 1, 4, 4}}, out{DType::f32, Shape{1, 1, 2, 2}};
  ASSERT_TRUE(median3().library);
  const int64_t builds = custom_op_builds();
  auto op = compile_custom_op("MedianPool", {example()}, {in}, {out}, kMedian3, o);
  EXPECT_EQ(custom_op_builds(), builds);  // served from the cache
  EXPECT_EQ(op->spec().type, "MedianPool");
  EXPECT_TRUE(op->has_gradient());

  OpSpec s;
  s.type = "MedianPool";
  s.inputs = {in};
  auto from_registry = OpRegistry::global().create(s, "reference");
  const Tensor x = grid(DType::f32);
  EXPECT_EQ(values(from_registry->run_forward(std::span(&x, 1))[0]), (std::vector<double>{5, 6, 8, 11}));
  EXPECT_EQ(OpRegistry::global().backends_of("MedianPool"), std::vector<std::string>{"reference"});
  const auto impls = OpRegistry::global().implementations("MedianPool", "reference");
  ASSERT_EQ(impls.size(), 1u);
  EXPECT_TRUE(impls[0]->backward);

  s.inputs = {TensorDesc{DType::f32, Shape{1, 1, 5, 5}}};
  const std::string m = message_of([&] { OpRegistry::global().create(s, "reference"); });
  EXPECT_TRUE(contains(m, "compiled for inputs (f32[1, 1, 4, 4]), asked for (f32[1, 1, 5, 5])")) << m;
}

TEST(CustomOpCompiler, ThrowingOperatorReportsEachErrorWithoutCrashing) {
  auto op = create(throwing(), "Throwing", {DType::f64, Shape{3}}, {DType::f64, Shape{3}});
  auto run = [&](double first) {
    const Tensor x = Tensor::from_values<double>({3}, {first, 5, 6});
    return message_of([&] { op->run_forward(std::span(&x, 1)); });
  };
  const std::string boom = run(1);
  EXPECT_TRUE(contains(boom, "Internal: Throwing (custom:libThrowing.so): forward failed: boom: x[0] is 1"))
      << boom;
  EXPECT_TRUE(
      contains(run(2), "InvalidArgument: Throwing (custom:libThrowing.so): forward failed: x[0] must not be 2"))
      << run(2);
  EXPECT_TRUE(contains(run(3), "Internal")) << run(3);
  EXPECT_TRUE(contains(run(3), "unknown exception (not derived from std::exception)")) << run(3);
  EXPECT_TRUE(contains(run(4), "InvalidArgument")) << run(4);
  EXPECT_TRUE(contains(run(4), "index 3 out of range for axis 0 of f64[3]")) << run(4);
  // The instance still works after its failures.
  EXPECT_EQ(run(0), "(no exception)");

  // The default backward reports itself unimplemented.
  const Tensor x = Tensor::from_values<double>({3}, {0, 5, 6});
  const auto y = op->run_forward(std::span(&x, 1));
  const std::string b = message_of([&] { op->run_backward(y, std::span(&x, 1), y); });
  EXPECT_TRUE(contains(b, "Unimplemented")) << b;
  EXPECT_TRUE(contains(b, "implements no backward")) << b;

  // A constructor that refuses the problem.
  const std::string c = message_of([] {
    create(throwing(), "Throwing", {DType::f32, Shape{3}}, {DType::f32, Shape{3}});
  });
  EXPECT_TRUE(contains(c, "InvalidArgument")) << c;
  EXPECT_TRUE(contains(c, "Throwing wants one rank-1 f64 input, got f32[3]")) << c;
}

std::string abi_mismatch_message() {
  return message_of([] { build_custom_op("Mismatch", {test_source("abi_mismatch.cpp")}, {}, options()); });
}

TEST(CustomOpCompiler, ConcurrentBuildsOfOneKeyBuildOnce) {
  // Two threads hold separate open files, so flock serialises them as it would two processes.
  // (The library is the small ABI-mismatch one: both threads build or find it, then refuse it.)
  const int64_t builds = custom_op_builds();
  std::vector<std::string> messages(2);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < messages.size(); ++i)
    threads.emplace_back([&, i] { messages[i] = abi_mismatch_message(); });
  for (auto& t : threads) t.join();
  EXPECT_EQ(custom_op_builds(), builds + 1);
  EXPECT_EQ(messages[0], messages[1]);
}

TEST(CustomOpCompiler, AbiVersionMismatchIsRefused) {
  const std::string m = abi_mismatch_message();
  EXPECT_TRUE(contains(m, "InvalidArgument")) << m;
  EXPECT_TRUE(contains(m, fmt::format("ABI version {}, but this deep500 speaks version {}",
                                      D5_CUSTOM_OP_ABI_VERSION + 1000, D5_CUSTOM_OP_ABI_VERSION)))
      << m;
}

TEST(CustomOpCompiler, CompilerErrorsCarryTheDiagnosticsAndAreNotCached) {
  const fs::path dir = test_cache() / "broken-src";
  fs::create_directories(dir);
  const fs::path src = dir / "broken.cpp";
  std::ofstream(src) << "#include \"deep500/op/custom_op.h\"\nint broken( { return 0; }\n";
  const int64_t builds = custom_op_builds();
  const std::string m = message_of([&] { build_custom_op("Broken", {src}, {}, options()); });
  EXPECT_TRUE(contains(m, "InvalidArgument: custom operator Broken: compilation failed")) << m;
  EXPECT_TRUE(contains(m, "broken.cpp:2")) << m;
  EXPECT_TRUE(contains(m, "error:")) << m;
  EXPECT_EQ(custom_op_builds(), builds + 1);

  // Fixed sources are a new key and build; this library exports only the version, which is
  // refused for its missing entry points.
  std::ofstream(src)
      << "#include \"deep500/op/custom_op.h\"\n"
         "extern \"C\" int32_t d5_custom_op_abi_version(void) { return D5_CUSTOM_OP_ABI_VERSION; }\n";
  const std::string fixed = message_of([&] { build_custom_op("Broken", {src}, {}, options()); });
  EXPECT_EQ(custom_op_builds(), builds + 2);
  EXPECT_TRUE(contains(fixed, "lacks required entry points: d5_custom_op_create, d5_custom_op_forward"))
      << fixed;
}

TEST(CustomOpCompiler, RejectsBadNamesAndDefinitionsBeforeBuilding) {
  const int64_t builds = custom_op_builds();
  EXPECT_THROW(build_custom_op("bad name", {example()}, kMedian3, options()), InvalidArgument);
  EXPECT_THROW(build_custom_op("MedianPool", {example()}, {{"1X", "2"}}, options()), InvalidArgument);
  EXPECT_THROW(build_custom_op("MedianPool", {example()}, {{"X", "a;b"}}, options()), InvalidArgument);
  EXPECT_THROW(build_custom_op("MedianPool", {test_cache() / "missing.cpp"}, {}, options()), InvalidArgument);
  EXPECT_THROW(build_custom_op("MedianPool", {}, {}, options()), InvalidArgument);
  EXPECT_THROW(build_custom_op("MedianPool", {fs::path(D5_SOURCE_DIR) / "include" / "deep500" / "op" / "custom_op.h"}, {},
                               options()),
               InvalidArgument);  // a header alone compiles nothing
  EXPECT_EQ(custom_op_builds(), builds);
}

// Restores an environment variable when the test ends.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) setenv(name, value, 1);
    else unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_) setenv(name_, old_->c_str(), 1);
    else unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(CustomOpCompiler, CacheAndIncludeDirectoriesFollowTheEnvironment) {
  {
    ScopedEnv cache("D5_CACHE_DIR", "/tmp/d5-cache-here");
    EXPECT_EQ(default_custom_op_cache_dir(), fs::path("/tmp/d5-cache-here"));
  }
  {
    ScopedEnv cache("D5_CACHE_DIR", nullptr), xdg("XDG_CACHE_HOME", nullptr), home("HOME", "/home/someone");
    EXPECT_EQ(default_custom_op_cache_dir(), fs::path("/home/someone/.cache/deep500/custom_ops"));
  }
  {
    ScopedEnv include("D5_INCLUDE_DIR", nullptr);
    EXPECT_EQ(custom_op_include_dir(), fs::path(D5_SOURCE_DIR) / "include");
  }
  {
    ScopedEnv include("D5_INCLUDE_DIR", "/nonexistent/include");
    const std::string m = message_of([] { custom_op_include_dir(); });
    EXPECT_TRUE(contains(m, "set D5_INCLUDE_DIR")) << m;
  }
}

}  // namespace
}  // namespace d5
