#include <gtest/gtest.h>

#include <algorithm>

#include "core/sysfs_parse.h"

namespace d5::detail {

TEST(SysfsParse, Integers) {
  EXPECT_EQ(parse_int(" 42\n"), 42);
  EXPECT_EQ(parse_int("42x"), std::nullopt);
  EXPECT_EQ(parse_int("-1"), std::nullopt);
  EXPECT_EQ(parse_int("18446744073709551615"), std::nullopt);  // fits uint64 only
  EXPECT_EQ(parse_uint64("18446744073709551615"), UINT64_MAX);
  EXPECT_EQ(split_words("  fpu  vme\tde\n"), (std::vector<std::string>{"fpu", "vme", "de"}));
  EXPECT_EQ(trim(" \t x y \n"), "x y");
  EXPECT_EQ(trim("   "), "");
}

constexpr std::string_view kX86CpuInfo =
    "processor\t: 0\n"
    "vendor_id\t: GenuineIntel\n"
    "model\t\t: 143\n"
    "model name\t: Intel(R) Xeon(R) Platinum 8480+\n"
    "cpu MHz\t\t: 2000.000\n"
    "flags\t\t: fpu sse4_2 avx2 amx_tile\n"
    "\n"
    "processor\t: 1\n"
    "vendor_id\t: SomethingElse\n";

constexpr std::string_view kArmCpuInfo =
    "processor\t: 0\n"
    "BogoMIPS\t: 50.00\n"
    "Features\t: fp asimd evtstrm aes sve\n"
    "CPU implementer\t: 0x41\n"
    "CPU part\t: 0xd40\n"
    "\n";

TEST(SysfsParse, CpuInfoFields) {
  EXPECT_EQ(cpuinfo_field(kX86CpuInfo, "vendor_id"), "GenuineIntel");  // first block wins
  EXPECT_EQ(cpuinfo_field(kX86CpuInfo, "model name"), "Intel(R) Xeon(R) Platinum 8480+");
  EXPECT_EQ(cpuinfo_field(kX86CpuInfo, "model"), "143");  // not confused with "model name"
  EXPECT_EQ(cpuinfo_field(kX86CpuInfo, "cpu MHz"), "2000.000");
  EXPECT_EQ(cpuinfo_field(kX86CpuInfo, "Features"), std::nullopt);
  EXPECT_EQ(cpuinfo_field(kArmCpuInfo, "CPU implementer"), "0x41");
  EXPECT_EQ(split_words(*cpuinfo_field(kArmCpuInfo, "Features")).size(), 5u);
}

TEST(SysfsParse, OsRelease) {
  constexpr std::string_view text =
      "# comment\n"
      "NAME=\"Debian GNU/Linux\"\n"
      "PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\n"
      "ID=debian\n"
      "VARIANT='Server Edition'\n"
      "QUOTED=\"say \\\"hi\\\" for \\$5\"\n";
  EXPECT_EQ(os_release_field(text, "PRETTY_NAME"), "Debian GNU/Linux 12 (bookworm)");
  EXPECT_EQ(os_release_field(text, "ID"), "debian");
  EXPECT_EQ(os_release_field(text, "VARIANT"), "Server Edition");
  EXPECT_EQ(os_release_field(text, "QUOTED"), "say \"hi\" for $5");
  EXPECT_EQ(os_release_field(text, "NAM"), std::nullopt);
}

TEST(SysfsParse, ProcSelfFiles) {
  constexpr std::string_view status =
      "Name:\td5_test\nVmPeak:\t  3060 kB\nVmHWM:\t    1652 kB\nVmRSS:\t    1600 kB\n";
  EXPECT_EQ(status_field_bytes(status, "VmHWM"), 1652 * 1024);
  EXPECT_EQ(status_field_bytes(status, "VmRSS"), 1600 * 1024);
  EXPECT_EQ(status_field_bytes(status, "Name"), std::nullopt);  // not a kB field
  EXPECT_EQ(status_field_bytes(status, "VmSwap"), std::nullopt);
  EXPECT_EQ(statm_resident_pages("765 413 345 5 0 90 0\n"), 413);
  EXPECT_EQ(statm_resident_pages("765"), std::nullopt);
}

bool contains(const std::vector<std::string>& v, const char* s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

// A Sapphire-Rapids-like CPUID: everything from SSE4.2 to AMX is present.
X86CpuidWords all_features() {
  X86CpuidWords w;
  w.leaf1_ecx = (1u << 12) | (1u << 20) | (1u << 27) | (1u << 28) | (1u << 29);
  w.has_leaf7 = true;
  w.leaf7_ebx = (1u << 5) | (1u << 16) | (1u << 17) | (1u << 28) | (1u << 30) | (1u << 31);
  w.leaf7_ecx = 1u << 11;
  w.leaf7_edx = (1u << 22) | (1u << 23) | (1u << 24) | (1u << 25);
  w.leaf7_1_eax = (1u << 4) | (1u << 5);
  return w;
}

TEST(X86Isa, AllStatesEnabledReportsEverything) {
  const uint64_t xcr0 = 0x7 | 0xe0 | 0x60000;
  const auto isa = x86_usable_isa(all_features(), xcr0);
  EXPECT_EQ(isa, (std::vector<std::string>{
                     "sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512dq", "avx512cd",
                     "avx512bw", "avx512vl", "avx512_vnni", "avx512_bf16", "avx512_fp16",
                     "avx_vnni", "amx_tile", "amx_int8", "amx_bf16"}));
}

TEST(X86Isa, PresentButNotEnabledByOsIsNotUsable) {
  // OS saves SSE+AVX state only (e.g. a kernel booted without AVX-512/AMX support).
  auto isa = x86_usable_isa(all_features(), 0x7);
  EXPECT_TRUE(contains(isa, "avx2"));
  EXPECT_TRUE(contains(isa, "avx_vnni"));
  EXPECT_FALSE(contains(isa, "avx512f"));
  EXPECT_FALSE(contains(isa, "avx512_bf16"));
  EXPECT_FALSE(contains(isa, "amx_tile"));

  // Tile state without ZMM state: AMX is usable, AVX-512 is not.
  isa = x86_usable_isa(all_features(), 0x7 | 0x60000);
  EXPECT_TRUE(contains(isa, "amx_int8"));
  EXPECT_FALSE(contains(isa, "avx512vl"));

  // No OSXSAVE: only the legacy SSE extensions remain.
  EXPECT_EQ(x86_usable_isa(all_features(), 0), (std::vector<std::string>{"sse4_2"}));
  // Partial AVX-512 state (opmask only) is not enough.
  EXPECT_FALSE(contains(x86_usable_isa(all_features(), 0x7 | 0x20), "avx512f"));
}

TEST(X86Isa, MissingLeaf7IgnoresItsWords) {
  auto w = all_features();
  w.has_leaf7 = false;
  const auto isa = x86_usable_isa(w, 0x7 | 0xe0 | 0x60000);
  EXPECT_EQ(isa, (std::vector<std::string>{"sse4_2", "avx", "fma", "f16c"}));
}

}  // namespace d5::detail
