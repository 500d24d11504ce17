#include <gtest/gtest.h>
#include <sched.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <regex>
#include <set>

#include <fmt/format.h>

#include "core/cpu_topology.h"
#include "core/sysfs_parse.h"
#include "deep500/core/device.h"
#include "deep500/core/system_info.h"
#include "deep500/core/threads.h"

namespace d5 {

// What the kernel's sysfs says about cpu0's caches, read here independently of hwloc; empty when
// the kernel exposes no cache directory (seen on VMs).
std::vector<CacheInfo> sysfs_caches_of_cpu0() {
  const std::string root = "/sys/devices/system/cpu/cpu0/cache/";
  std::vector<CacheInfo> caches;
  for (int i = 0;; ++i) {
    const std::string dir = root + "index" + std::to_string(i) + "/";
    const auto level = detail::read_int_file(dir + "level");
    const auto size = detail::read_text_file(dir + "size");
    if (!level || !size) break;
    CacheInfo c;
    c.level = static_cast<int>(*level);
    c.type = std::string(detail::trim(detail::read_text_file(dir + "type").value_or("")));
    // "48K", "1024K", "32M": binary multiples, as the kernel means them.
    const std::string text(detail::trim(*size));
    const char unit = text.empty() ? '\0' : text.back();
    const int shift = unit == 'K' ? 10 : unit == 'M' ? 20 : unit == 'G' ? 30 : 0;
    c.size_bytes = detail::parse_int(shift ? text.substr(0, text.size() - 1) : text).value_or(-1) << shift;
    c.line_bytes = static_cast<int>(detail::read_int_file(dir + "coherency_line_size").value_or(0));
    caches.push_back(c);
  }
  detail::sort_in_cache_order(caches);
  return caches;
}

std::string describe(const std::vector<CacheInfo>& caches) {
  std::string s;
  for (const auto& c : caches) s += fmt::format("L{} {} {} B line {}; ", c.level, c.type, c.size_bytes, c.line_bytes);
  return s;
}

// Level, type, size and line agree (sharing is counted differently by each source).
void expect_same_caches(const std::vector<CacheInfo>& actual, const std::vector<CacheInfo>& expected,
                        const std::string& oracle) {
  EXPECT_EQ(describe(actual), describe(expected)) << "caches against " << oracle;
}

TEST(CpuInfo, MatchesThisHost) {
  const CpuInfo& cpu = cpu_info();
  EXPECT_EQ(cpu.logical_cores, sysconf(_SC_NPROCESSORS_ONLN));
  EXPECT_FALSE(cpu.model.empty());
  EXPECT_FALSE(cpu.architecture.empty());
  EXPECT_GT(cpu.memory_bytes, int64_t{1} << 30);
  EXPECT_EQ(cpu.topology_source.rfind("hwloc 2.", 0), 0u) << cpu.topology_source;
  EXPECT_GE(cpu.physical_cores, 1);
  EXPECT_LE(cpu.physical_cores, cpu.logical_cores);
  EXPECT_GE(cpu.sockets, 1);
  EXPECT_LE(cpu.sockets, cpu.physical_cores);
  EXPECT_GE(cpu.numa_nodes, 1);
  EXPECT_GE(cpu.max_mhz, 0.0);
  EXPECT_EQ(&cpu, &cpu_info());  // cached, not probed again

  // Either caches with their source, or none with the reason: never both, never neither.
  if (cpu.caches.empty()) {
    EXPECT_TRUE(cpu.cache_source.empty());
    EXPECT_NE(cpu.caches_unavailable_reason.find("found no cache"), std::string::npos)
        << cpu.caches_unavailable_reason;
    EXPECT_TRUE(sysfs_caches_of_cpu0().empty()) << "the kernel lists caches that were not found";
    return;
  }
  EXPECT_TRUE(cpu.caches_unavailable_reason.empty()) << cpu.caches_unavailable_reason;
  EXPECT_FALSE(cpu.cache_source.empty());
  bool sized = false;
  for (const auto& c : cpu.caches) {
    EXPECT_GE(c.level, 1);
    EXPECT_TRUE(c.type == "Data" || c.type == "Instruction" || c.type == "Unified") << c.type;
    EXPECT_GE(c.shared_by_cpus, 0);
    sized = sized || c.size_bytes > 0;
  }
  EXPECT_TRUE(sized) << "no cache of cpu0 with a size";
  // Ordered as the kernel indexes them: levels never decrease.
  for (size_t i = 1; i < cpu.caches.size(); ++i)
    EXPECT_LE(cpu.caches[i - 1].level, cpu.caches[i].level);
}

// Where the kernel lists cpu0's caches, the manifest says what it says.
TEST(CpuInfo, CachesAgreeWithTheKernelsSysfs) {
  const auto sysfs = sysfs_caches_of_cpu0();
  if (sysfs.empty()) GTEST_SKIP() << "this kernel exposes no /sys/devices/system/cpu/cpu0/cache";
  expect_same_caches(cpu_info().caches, sysfs, "sysfs");
  EXPECT_NE(cpu_info().cache_source.find("sysfs"), std::string::npos) << cpu_info().cache_source;
}

#if defined(__x86_64__) && defined(__linux__)
// deep500's own CPUID decoder (the fallback) against hwloc's result: two readings of the same
// hardware description by independent code. Run on cpu0, whose caches the manifest describes
// (hybrid CPUs have other caches on other cores).
TEST(CpuInfo, CpuidFallbackAgreesWithHwloc) {
  cpu_set_t saved, cpu0;
  ASSERT_EQ(sched_getaffinity(0, sizeof saved, &saved), 0);
  CPU_ZERO(&cpu0);
  CPU_SET(0, &cpu0);
  if (sched_setaffinity(0, sizeof cpu0, &cpu0) != 0) GTEST_SKIP() << "this process may not run on cpu0";
  std::string why;
  const auto cpuid = detail::cpuid_caches(cpu_info().vendor, &why);
  sched_setaffinity(0, sizeof saved, &saved);
  if (cpuid.empty()) GTEST_SKIP() << "no CPUID cache leaf on this CPU: " << why;
  EXPECT_TRUE(why.empty()) << why;
  expect_same_caches(cpu_info().caches, cpuid, "CPUID");
}
#endif

TEST(CpuCaches, DecodeCpuidLeafWords) {
  // A 48 KiB, 12-way L1 data cache with 64-byte lines and 64 sets, as leaf 4 / 0x8000001D
  // encode it: EAX type 1 level 1, EBX ways-1 << 22 | partitions-1 << 12 | line-1, ECX sets-1.
  const auto l1d = detail::decode_cpuid_cache(0x21, (11u << 22) | 63u, 63);
  ASSERT_TRUE(l1d.has_value());
  EXPECT_EQ(l1d->level, 1);
  EXPECT_EQ(l1d->type, "Data");
  EXPECT_EQ(l1d->line_bytes, 64);
  EXPECT_EQ(l1d->size_bytes, 48 * 1024);
  EXPECT_EQ(l1d->shared_by_cpus, 0);  // unknown from this leaf
  // A 32 MiB, 16-way unified L3 with two partitions: 16 * 2 * 64 * 16384 bytes.
  const auto l3 = detail::decode_cpuid_cache(0x63, (15u << 22) | (1u << 12) | 63u, 16383);
  ASSERT_TRUE(l3.has_value());
  EXPECT_EQ(l3->level, 3);
  EXPECT_EQ(l3->type, "Unified");
  EXPECT_EQ(l3->size_bytes, int64_t{32} << 20);
  EXPECT_EQ(detail::decode_cpuid_cache(0x22, 0, 0)->type, "Instruction");
  EXPECT_FALSE(detail::decode_cpuid_cache(0, 0, 0).has_value());  // the list's end
  EXPECT_FALSE(detail::decode_cpuid_cache(0x24, 0, 0).has_value());  // reserved type 4
}

// The words an AMD EPYC guest returned for leaves 0x80000005/6, and the caches hwloc 2.9 reported
// for the same guest: L1d 48 KiB, L1i 32 KiB, L2 1 MiB, L3 1016 x 512 KiB, 64-byte lines.
TEST(CpuCaches, DecodeAmdLegacyLeaves) {
  const auto c = detail::decode_amd_legacy_caches(0x300c0140, 0x20080140, 0x04006140, 0x0fe09140);
  EXPECT_EQ(describe(c), "L1 Data 49152 B line 64; L1 Instruction 32768 B line 64; L2 Unified 1048576 B line 64; "
                         "L3 Unified 532676608 B line 64; ");
  // No L3 (size field 0): three caches.
  EXPECT_EQ(detail::decode_amd_legacy_caches(0x300c0140, 0x20080140, 0x04006140, 0).size(), 3u);
}

TEST(CpuCaches, SortedInTheKernelsIndexOrder) {
  std::vector<CacheInfo> c(4);
  c[0].level = 3, c[0].type = "Unified";
  c[1].level = 1, c[1].type = "Instruction";
  c[2].level = 2, c[2].type = "Unified";
  c[3].level = 1, c[3].type = "Data";
  detail::sort_in_cache_order(c);
  EXPECT_EQ(describe(c), "L1 Data 0 B line 0; L1 Instruction 0 B line 0; L2 Unified 0 B line 0; L3 Unified 0 B line 0; ");
}

TEST(CpuInfo, HasLooksUpIsaNames) {
  CpuInfo c;
  c.isa = {"avx2", "fma"};
  EXPECT_TRUE(c.has("avx2"));
  EXPECT_FALSE(c.has("avx"));  // whole names only
  EXPECT_FALSE(c.has("avx512f"));
}

#if defined(__x86_64__) && defined(__linux__)
// deep500's names are the kernel's flag names, and the kernel also drops flags whose register
// state it does not enable, so both must agree on every name deep500 knows about.
TEST(CpuInfo, IsaAgreesWithKernelFlags) {
  const auto text = detail::read_text_file("/proc/cpuinfo");
  ASSERT_TRUE(text.has_value());
  const auto kernel_words = detail::split_words(detail::cpuinfo_field(*text, "flags").value_or(""));
  const std::set<std::string> kernel(kernel_words.begin(), kernel_words.end());
  const std::set<std::string> ours(cpu_info().isa.begin(), cpu_info().isa.end());
  EXPECT_TRUE(ours.count("sse4_2"));  // every x86-64 host worth benchmarking has it
  for (const char* name : {"sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512dq",
                           "avx512cd", "avx512bw", "avx512vl", "avx512_vnni", "avx512_bf16",
                           "avx512_fp16", "avx_vnni", "amx_tile", "amx_int8", "amx_bf16"}) {
    EXPECT_EQ(ours.count(name), kernel.count(name)) << name;
  }
}
#endif

TEST(OsInfo, MatchesUname) {
  utsname u{};
  ASSERT_EQ(uname(&u), 0);
  const OsInfo& os = os_info();
  EXPECT_EQ(os.kernel, u.release);
  EXPECT_EQ(os.kernel_version, u.version);
  EXPECT_EQ(os.machine, u.machine);
  EXPECT_EQ(os.machine, cpu_info().architecture);
  EXPECT_FALSE(os.hostname.empty());
  EXPECT_FALSE(os.name.empty());
  if (const auto text = detail::read_text_file("/etc/os-release")) {
    if (const auto pretty = detail::os_release_field(*text, "PRETTY_NAME")) {
      EXPECT_EQ(os.name, *pretty);
    }
  }
}

TEST(Environment, PicksRelevantVariablesOnly) {
  ASSERT_EQ(setenv("OMP_NUM_THREADS", "3", 1), 0);
  ASSERT_EQ(setenv("CUDA_VISIBLE_DEVICES", "1,0", 1), 0);
  ASSERT_EQ(setenv("D5_TEST_SYSTEM_MARKER", "a=b", 1), 0);  // value keeps its own '='
  ASSERT_EQ(setenv("UNRELATED_D5_TEST_VAR", "x", 1), 0);
  ASSERT_EQ(setenv("OMPX", "x", 1), 0);  // shares letters with OMP_ but not the prefix
  const auto env = relevant_environment();
  EXPECT_EQ(env.count("OMP_NUM_THREADS") ? env.at("OMP_NUM_THREADS") : "", "3");
  EXPECT_EQ(env.count("CUDA_VISIBLE_DEVICES") ? env.at("CUDA_VISIBLE_DEVICES") : "", "1,0");
  EXPECT_EQ(env.count("D5_TEST_SYSTEM_MARKER") ? env.at("D5_TEST_SYSTEM_MARKER") : "", "a=b");
  EXPECT_EQ(env.count("UNRELATED_D5_TEST_VAR"), 0u);
  EXPECT_EQ(env.count("OMPX"), 0u);
  EXPECT_EQ(env.count("PATH"), 0u);
  for (const char* n : {"OMP_NUM_THREADS", "CUDA_VISIBLE_DEVICES", "D5_TEST_SYSTEM_MARKER",
                        "UNRELATED_D5_TEST_VAR", "OMPX"})
    unsetenv(n);
}

TEST(Time, FormatsKnownInstants) {
  using namespace std::chrono;
  const system_clock::time_point epoch{};
  EXPECT_EQ(iso8601_utc(epoch), "1970-01-01T00:00:00.000Z");
  EXPECT_EQ(iso8601_utc(epoch + milliseconds(1234)), "1970-01-01T00:00:01.234Z");
  // 2026-11-21T23:50:34.123Z, the example in the header.
  EXPECT_EQ(iso8601_utc(epoch + seconds(1795305034) + microseconds(123999)),
            "2026-11-21T23:50:34.123Z");  // truncated, not rounded up to .124
  EXPECT_EQ(iso8601_utc(epoch - milliseconds(1)), "1969-12-31T23:59:59.999Z");
}

TEST(Time, NowIsIso8601AndCurrent) {
  const std::string now = utc_now_iso8601();
  EXPECT_TRUE(std::regex_match(now, std::regex(R"(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z)")))
      << now;
  // Same second-resolution prefix as an independent clock read, allowing a second boundary.
  const auto before = iso8601_utc(std::chrono::system_clock::now() - std::chrono::seconds(1));
  const auto after = iso8601_utc(std::chrono::system_clock::now() + std::chrono::seconds(1));
  EXPECT_LE(before, now);  // ISO 8601 strings of the same width sort chronologically
  EXPECT_LE(now, after);
}


TEST(CpuList, FormatsRangesAsTheKernelDoes) {
  EXPECT_EQ(format_cpu_list({}), "");
  EXPECT_EQ(format_cpu_list({0}), "0");
  EXPECT_EQ(format_cpu_list({0, 1}), "0-1");
  EXPECT_EQ(format_cpu_list({6, 0, 2, 1, 3, 9, 8, 3}), "0-3,6,8-9");  // unsorted, a duplicate
  EXPECT_EQ(format_cpu_list({1, 3, 5}), "1,3,5");
  // The kernel's own notation: unbound, the process may run on every online CPU, and the list
  // reads as /sys/devices/system/cpu/online does.
  const ThreadSettings t = thread_settings();
  ASSERT_FALSE(t.allowed_cpus.empty());
  if (static_cast<long>(t.allowed_cpus.size()) == sysconf(_SC_NPROCESSORS_ONLN)) {
    std::string online = detail::read_text_file("/sys/devices/system/cpu/online").value_or("");
    while (!online.empty() && std::isspace(static_cast<unsigned char>(online.back()))) online.pop_back();
    EXPECT_EQ(format_cpu_list(t.allowed_cpus), online);
  }
}

}  // namespace d5
