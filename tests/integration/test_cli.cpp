// Integration tests: the real d5 binary, its output and its exit codes.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <map>

#include <nlohmann/json.hpp>

#include "process.h"

namespace d5::test {

TEST(CliInfo, JsonIsValidAndCarriesTheManifest) {
  const auto r = run_d5({"--seed", "123", "info", "--format", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  for (const char* key : {"version", "git_revision", "git_dirty", "compiler", "build_type", "cpu", "os",
                          "libraries", "backends", "memory_bytes", "hostname", "threads", "environment",
                          "seeds", "command_line", "start_time_utc"})
    EXPECT_TRUE(j.contains(key)) << "missing " << key;
  EXPECT_EQ(j["seeds"]["master"], 123);
  EXPECT_EQ(j["command_line"].back(), "json");
  EXPECT_FALSE(j["cpu"]["model"].get<std::string>().empty());
  EXPECT_EQ(j["git_revision"].get<std::string>().size(), 40u);  // built from a git checkout
  bool has_reference = false;
  for (const auto& b : j["backends"]) has_reference |= b["name"] == "reference";
  EXPECT_TRUE(has_reference);
}

TEST(CliInfo, MathModeReachesTheManifest) {
  const auto strict = run_d5({"info", "--format", "json"});
  ASSERT_EQ(strict.exit_code, 0) << strict.err;
  EXPECT_EQ(nlohmann::json::parse(strict.out)["f32_math"], "strict");
  const auto tf32 = run_d5({"--math", "tf32", "info", "--format", "json"});
  ASSERT_EQ(tf32.exit_code, 0) << tf32.err;
  EXPECT_EQ(nlohmann::json::parse(tf32.out)["f32_math"], "tf32");
  const auto fast = run_d5({"--math", "fast", "info", "--format", "json"});
  ASSERT_EQ(fast.exit_code, 0) << fast.err;
  EXPECT_EQ(nlohmann::json::parse(fast.out)["f32_math"], "fast");
  const auto unknown = run_d5({"--math", "tf16", "info"});
  EXPECT_NE(unknown.exit_code, 0);
  EXPECT_NE(unknown.err.find("fast"), std::string::npos) << unknown.err;
}

// With hwloc told to use neither sysfs nor CPUID, deep500 decodes CPUID itself: the same caches,
// and the manifest says where they came from.
TEST(CliInfo, CachesFallBackToCpuidWhenHwlocFindsNone) {
  const auto normal = nlohmann::json::parse(run_d5({"info", "--format", "json"}).out)["cpu"];
  if (normal["architecture"] != "x86_64") GTEST_SKIP() << "CPUID exists on x86 only";
  ASSERT_EQ(setenv("HWLOC_COMPONENTS", "-linux,-x86", 1), 0);
  const auto r = run_d5({"info", "--format", "json"});
  unsetenv("HWLOC_COMPONENTS");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto cpu = nlohmann::json::parse(r.out)["cpu"];
  if (normal["caches"].empty()) {
    EXPECT_TRUE(cpu["caches"].empty());
    EXPECT_NE(cpu["caches_unavailable_reason"].get<std::string>().find("found no cache"), std::string::npos);
    return;
  }
  EXPECT_EQ(cpu["cache_source"].get<std::string>().rfind("CPUID, decoded by deep500", 0), 0u) << cpu["cache_source"];
  ASSERT_EQ(cpu["caches"].size(), normal["caches"].size()) << cpu["caches"] << normal["caches"];
  for (size_t i = 0; i < cpu["caches"].size(); ++i) {
    for (const char* key : {"level", "type", "size_bytes", "line_bytes"})
      EXPECT_EQ(cpu["caches"][i][key], normal["caches"][i][key]) << "cache " << i << " " << key;
  }
  // And the console shows the source.
  const auto console = run_d5({"info"}).out;
  EXPECT_NE(console.find("caches     L1"), std::string::npos) << console;
  EXPECT_NE(console.find(normal["cache_source"].get<std::string>()), std::string::npos) << console;
}

TEST(CliInfo, ConsoleNamesBackendsAndHost) {
  const auto r = run_d5({"info"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("backends"), std::string::npos);
  EXPECT_NE(r.out.find("reference"), std::string::npos);
  EXPECT_NE(r.out.find("cpu"), std::string::npos);
}

TEST(CliInfo, ThreadsReachOpenMp) {
  const auto r = run_d5({"--threads", "1", "info", "--format", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["threads"]["requested"], 1);
  EXPECT_EQ(j["threads"]["omp_max_threads"], 1);
  for (const auto& [name, n] : j["threads"]["backends"].items()) EXPECT_EQ(n, 1) << name;
}

TEST(CliInfo, TheManifestRecordsTheCpusTheProcessMayRunOn) {
  const auto all = nlohmann::json::parse(run_d5({"info", "--format", "json"}).out);
  const int count = all["threads"]["allowed_cpu_count"];
  EXPECT_GE(count, 1);
  EXPECT_LE(count, all["cpu"]["logical_cores"].get<int>());  // a container's cpuset may hold fewer
  // taskset (util-linux, in every Debian) binds it to the first CPU it may use; OpenMP's default follows.
  const std::string cpus = all["threads"]["allowed_cpus"];
  const std::string first = cpus.substr(0, cpus.find_first_of(",-"));
  const auto r = run_process("/usr/bin/env", {"-u", "OMP_NUM_THREADS", "/usr/bin/taskset", "-c", first, d5_binary(),
                                              "info", "--format", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto bound = nlohmann::json::parse(r.out);
  EXPECT_EQ(bound["threads"]["allowed_cpus"], first);
  EXPECT_EQ(bound["threads"]["allowed_cpu_count"], 1);
  EXPECT_EQ(bound["threads"]["omp_max_threads"], 1);
}

// Under a launcher, local rank r of a node gets the r-th GPU of a set CUDA_VISIBLE_DEVICES list
// before anything starts the CUDA runtime; the manifest says so. D5_GPU_BINDING=off keeps the list.
TEST(CliInfo, EachLocalRankIsGivenItsOwnGpu) {
  auto info = [](const std::vector<std::string>& env) {
    std::vector<std::string> args = {"-u", "D5_GPU_BINDING",          "-u", "MPI_LOCALRANKID", "-u", "SLURM_LOCALID",
                                     "-u", "OMPI_COMM_WORLD_LOCAL_RANK", "CUDA_VISIBLE_DEVICES=3,5"};
    args.insert(args.end(), env.begin(), env.end());
    args.insert(args.end(), {d5_binary(), "info", "--format", "json"});
    return run_process("/usr/bin/env", args);
  };
  const auto bound = info({"OMPI_COMM_WORLD_LOCAL_RANK=1"});
  ASSERT_EQ(bound.exit_code, 0) << bound.err;
  const auto j = nlohmann::json::parse(bound.out);
  EXPECT_EQ(j["environment"]["CUDA_VISIBLE_DEVICES"], "5");
  EXPECT_EQ(j["gpu_binding"], "local rank 1 -> CUDA_VISIBLE_DEVICES=5 (from CUDA_VISIBLE_DEVICES=3,5)");
  const auto off = info({"OMPI_COMM_WORLD_LOCAL_RANK=1", "D5_GPU_BINDING=off"});
  ASSERT_EQ(off.exit_code, 0) << off.err;
  const auto k = nlohmann::json::parse(off.out);
  EXPECT_EQ(k["environment"]["CUDA_VISIBLE_DEVICES"], "3,5");
  EXPECT_FALSE(k.contains("gpu_binding"));
  const auto alone = info({});
  ASSERT_EQ(alone.exit_code, 0) << alone.err;
  EXPECT_EQ(nlohmann::json::parse(alone.out)["environment"]["CUDA_VISIBLE_DEVICES"], "3,5");
  const auto bad = info({"OMPI_COMM_WORLD_LOCAL_RANK=1", "D5_GPU_BINDING=yes"});
  EXPECT_EQ(bad.exit_code, kExitUsage);
  EXPECT_NE(bad.err.find("D5_GPU_BINDING is 'local-rank'"), std::string::npos) << bad.err;
}

TEST(CliInfo, DefaultThreadsAgreeAcrossLibraries) {
  // LibTorch's lazy initialization must not leave OpenMP (and so oneDNN) at another count.
  const auto j = nlohmann::json::parse(run_d5({"info", "--format", "json"}).out);
  const int omp = j["threads"]["omp_max_threads"];
  EXPECT_GT(omp, 0);
  for (const auto& [name, n] : j["threads"]["backends"].items()) EXPECT_EQ(n, omp) << name;
}

TEST(CliInfo, OutputFileIsWritten) {
  const auto path = (std::filesystem::temp_directory_path() / "d5-info-test.json").string();
  std::filesystem::remove(path);
  const auto r = run_d5({"info", "--format", "json", "-o", path});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(r.out.empty());
  EXPECT_EQ(nlohmann::json::parse(read_file(path))["version"], nlohmann::json::parse(run_d5({"info", "--format", "json"}).out)["version"]);
  std::filesystem::remove(path);
}

// The manifest's libraries are what this binary links: ONNX (and protobuf) only where exporting a
// model works, not wherever the machine has the packages.
TEST(CliInfo, LibrariesNameOnlyWhatThisBinaryLinks) {
  const auto path = (std::filesystem::temp_directory_path() / "d5-info-lenet.onnx").string();
  const auto exported = run_d5({"models", "export", "lenet5", "-o", path});
  std::filesystem::remove(path);
  ASSERT_TRUE(exported.exit_code == 0 || exported.exit_code == kExitNotBuilt) << exported.err;
  const auto libraries = nlohmann::json::parse(run_d5({"info", "--format", "json"}).out)["libraries"];
  EXPECT_EQ(libraries.contains("onnx"), exported.exit_code == 0) << libraries.dump();
  EXPECT_EQ(libraries.contains("protobuf"), exported.exit_code == 0) << libraries.dump();
}

// Open MPI says at build time whether it takes GPU buffers (MPIX_CUDA_AWARE_SUPPORT); the manifest
// carries it, since it decides whether GPU tensors are staged through the host.
TEST(CliInfo, OpenMpiSaysWhetherItIsCudaAware) {
  const auto libraries = nlohmann::json::parse(run_d5({"info", "--format", "json"}).out)["libraries"];
  if (!libraries.contains("mpi")) GTEST_SKIP() << "this d5 was built without MPI";
  const std::string runtime = libraries["mpi"]["runtime"];
  if (runtime.find("Open MPI") == std::string::npos) GTEST_SKIP() << "the MPI library is not Open MPI: " << runtime;
  EXPECT_TRUE(runtime.ends_with(", built CUDA-aware") || runtime.ends_with(", built without CUDA support")) << runtime;
}

// Whether the torch executor can run on a GPU is a property of the LibTorch linked: the manifest
// says it (Debian's LibTorch is CPU-only; a PyTorch installation's may have CUDA).
TEST(CliInfo, LibTorchSaysWhetherItWasBuiltWithCuda) {
  const auto libraries = nlohmann::json::parse(run_d5({"info", "--format", "json"}).out)["libraries"];
  if (!libraries.contains("libtorch")) GTEST_SKIP() << "this d5 was built without the torch backend";
  const std::string runtime = libraries["libtorch"]["runtime"];
  EXPECT_TRUE(runtime.ends_with(", built with CUDA") || runtime.ends_with(", built without CUDA")) << runtime;
  // The version comes first, as compiled.
  EXPECT_TRUE(runtime.starts_with(libraries["libtorch"]["compiled"].get<std::string>() + ", ")) << libraries.dump();
}

// A disk that fills while d5 writes its result: exit code 4 naming the cause, the previous file
// intact. The disk is "full" through a file-size limit set by the shell, with SIGXFSZ ignored so
// that d5 sees the failed write (as it sees ENOSPC) instead of being killed.
TEST(CliInfo, AFullDiskEndsWithExitCode4AndKeepsThePreviousFile) {
  const auto path = (std::filesystem::temp_directory_path() / "d5-full-disk-test.json").string();
  {
    std::ofstream(path) << "{\"previous\": true}\n";
  }
  const auto r = run_process("/bin/bash", {"-c", "trap '' XFSZ; ulimit -f 1; exec \"$0\" info --format json -o \"$1\"",
                                           d5_binary(), path});
  EXPECT_EQ(r.exit_code, 4) << r.err;
  EXPECT_NE(r.err.find("disk full?"), std::string::npos) << r.err;
  EXPECT_EQ(read_file(path), "{\"previous\": true}\n");
  std::filesystem::remove(path);
}

TEST(CliStats, SummarizesSamplesFromStdin) {
  // 1..10: median 5.5; at 95% the exact binomial ranks are 2 and 9.
  const auto r = run_d5({"stats", "-", "--format", "json"}, "1 2 3\n4,5,6 # comment\n7\n8\n9\n10\n");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["n"], 10);
  EXPECT_DOUBLE_EQ(j["median"].get<double>(), 5.5);
  EXPECT_DOUBLE_EQ(j["median_ci"]["lower"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(j["median_ci"]["upper"].get<double>(), 9.0);
}

TEST(CliStats, TooFewSamplesSayWhyInsteadOfInventingACi) {
  const auto r = run_d5({"stats", "-"}, "1 2 3\n");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("CI unavailable"), std::string::npos) << r.out;
}

TEST(CliOpsList, ReferenceCoversForwardAndBackward) {
  const auto r = run_d5({"ops", "list", "--backend", "reference", "--format", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["backends"], nlohmann::json::array({"reference"}));
  std::map<std::string, nlohmann::json> ops;
  for (const auto& e : j["ops"]) ops[e["op"]] = e["backends"]["reference"];
  ASSERT_TRUE(ops.count("Relu"));
  EXPECT_EQ(ops["Relu"]["backward"], true);
  ASSERT_TRUE(ops.count("Equal"));
  EXPECT_EQ(ops["Equal"]["forward"], true);
  EXPECT_EQ(ops["Equal"]["backward"], false);  // comparisons have no gradient
  const auto md = run_d5({"ops", "list", "--format", "markdown"});
  EXPECT_NE(md.out.find("| Relu |"), std::string::npos);
}

struct BadInput {
  std::vector<std::string> args;
  std::string stdin_text;
  int exit_code;
  std::string message;  // a fragment the single stderr line must contain
};

class CliBadInput : public ::testing::TestWithParam<BadInput> {};

TEST_P(CliBadInput, OneLineOnStderrAndANamedExitCode) {
  const auto& p = GetParam();
  const auto r = run_d5(p.args, p.stdin_text);
  EXPECT_EQ(r.signal, 0) << "crashed";
  EXPECT_EQ(r.exit_code, p.exit_code) << r.err;
  EXPECT_EQ(count_lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find(p.message), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("terminate"), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, CliBadInput,
    ::testing::Values(
        BadInput{{"frobnicate"}, "", 2, "frobnicate"},
        BadInput{{}, "", 2, "subcommand"},
        BadInput{{"info", "--format", "xml"}, "", 2, "xml"},
        BadInput{{"--threads", "-3", "info"}, "", 2, "threads"},
        BadInput{{"--threads", "many", "info"}, "", 2, "many"},
        BadInput{{"--math", "tf16", "info"}, "", 2, "tf16"},
        BadInput{{"stats", "/nonexistent/samples.txt"}, "", 4, "cannot open"},
        BadInput{{"stats", "-"}, "1 2 x3\n", 4, "<stdin>:1: 'x3' is not a finite number"},
        BadInput{{"stats", "-"}, "", 2, "no samples"},
        BadInput{{"info", "-o", "/nonexistent-dir/info.txt"}, "", 4, "does not exist"},
        BadInput{{"ops", "list", "--backend", "nosuch"}, "", 2, "unknown backend 'nosuch'"},
        BadInput{{"ops"}, "", 2, "subcommand"}),
    [](const auto& info) { return "case" + std::to_string(info.index); });

TEST(Cli, HelpAndVersion) {
  const auto h = run_d5({"--help"});
  EXPECT_EQ(h.exit_code, 0);
  EXPECT_NE(h.out.find("info"), std::string::npos);
  EXPECT_NE(h.out.find("stats"), std::string::npos);
  EXPECT_EQ(run_d5({"info", "--help"}).exit_code, 0);
  const auto v = run_d5({"--version"});
  EXPECT_EQ(v.exit_code, 0);
  EXPECT_NE(v.out.find("deep500"), std::string::npos);
}

}  // namespace d5::test
