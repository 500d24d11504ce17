#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "deep500/metrics/energy.h"
#include "deep500/core/error.h"
#include "deep500/metrics/memory.h"

namespace d5 {

namespace fs = std::filesystem;

constexpr int64_t kMiB = int64_t{1} << 20;
constexpr int64_t kTouched = 64 * kMiB;

// mmap rather than new[]: the allocator might reuse memory that is already resident, or keep
// freed memory mapped, and either would hide the kernel behaviour under test.
struct TouchedMapping {
  void* p = nullptr;
  TouchedMapping() {
    p = mmap(nullptr, kTouched, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return;
    // One write per page faults every page in; volatile keeps the stores.
    auto* bytes = static_cast<volatile char*>(p);
    for (int64_t i = 0; i < kTouched; i += 4096) bytes[i] = 1;
  }
  ~TouchedMapping() {
    if (p != MAP_FAILED) munmap(p, kTouched);
  }
  bool ok() const { return p != MAP_FAILED; }
};

// Tolerance: the mapping itself accounts for exactly 64 MiB of resident pages. What else moves
// the number meanwhile is small: gtest's bookkeeping and stack growth (tens of KiB); with
// transparent huge pages the mapping's unaligned ends may be backed by partial 2 MiB pages (at
// most 2 MiB each side); and since Linux 6.2 the RSS counters are per-CPU and read
// approximately (up to one batch, 32 pages or 2 per CPU, per CPU the test ran on). 4 MiB below
// and 8 MiB above cover that and still catch a missed or doubled buffer.
TEST(Memory, RssGrowsByTouchedBytes) {
  const int64_t before = current_rss_bytes();
  ASSERT_GT(before, 0);
  TouchedMapping m;
  ASSERT_TRUE(m.ok());
  const int64_t grown = current_rss_bytes() - before;
  EXPECT_GE(grown, kTouched - 4 * kMiB);
  EXPECT_LE(grown, kTouched + 8 * kMiB);
  // The high-water mark includes the present; 1 MiB of slack for the approximate counters.
  EXPECT_GE(peak_rss_bytes(), current_rss_bytes() - kMiB);
}

TEST(Memory, ResetPeakMeasuresARegion) {
  {
    TouchedMapping m;
    ASSERT_TRUE(m.ok());
    EXPECT_GE(peak_rss_bytes(), kTouched);
  }
  const int64_t peak_with_buffer = peak_rss_bytes();
  if (!reset_peak_rss()) GTEST_SKIP() << "kernel refuses /proc/self/clear_refs";
  // After the reset the high-water mark is today's RSS, which no longer holds the buffer.
  EXPECT_LE(peak_rss_bytes(), peak_with_buffer - kTouched + 4 * kMiB);
  EXPECT_GE(peak_rss_bytes(), current_rss_bytes() - kMiB);
}

// A fake /sys/class/powercap in a temporary directory.
class FakePowercap : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "d5_powercap_XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    root_ = tmpl;
  }
  void TearDown() override { fs::remove_all(root_); }

  void write(const fs::path& file, const std::string& text) {
    fs::create_directories(file.parent_path());
    std::ofstream(file) << text << "\n";
  }
  // A zone directory with the three files deep500 reads; `rel` is relative to the root.
  void zone(const std::string& rel, const std::string& name, uint64_t energy, uint64_t max) {
    write(root_ / rel / "name", name);
    write(root_ / rel / "energy_uj", std::to_string(energy));
    write(root_ / rel / "max_energy_range_uj", std::to_string(max));
  }
  void set_energy(const RaplDomain& d, uint64_t uj) {
    write(fs::path(d.path) / "energy_uj", std::to_string(uj));
  }

  fs::path root_;
};

constexpr uint64_t kMax = 262143328850;  // a typical package counter range

TEST_F(FakePowercap, ProbesPackagesAndSubzonesInOrder) {
  zone("intel-rapl:1", "package-1", 500, kMax);
  zone("intel-rapl:0", "package-0", 1000, kMax);
  zone("intel-rapl:0/intel-rapl:0:0", "core", 200, 65532610987);  // only nested, no link
  zone("intel-rapl:0:1", "dram", 300, kMax);
  zone("intel-rapl-mmio:0", "package-0", 999, kMax);  // mirror of package-0: ignored
  write(root_ / "intel-rapl" / "enabled", "1");           // the control type, not a zone

  std::string reason = "stale";
  const auto domains = probe_rapl_domains(root_.string(), &reason);
  EXPECT_EQ(reason, "");
  ASSERT_EQ(domains.size(), 4u);
  EXPECT_EQ(domains[0].name, "package-0");
  EXPECT_EQ(domains[1].name, "core");
  EXPECT_EQ(domains[1].max_energy_uj, 65532610987u);
  EXPECT_EQ(domains[1].path, (root_ / "intel-rapl:0" / "intel-rapl:0:0").string());
  EXPECT_EQ(domains[2].name, "dram");
  EXPECT_EQ(domains[3].name, "package-1");
  EXPECT_EQ(domains[0].max_energy_uj, kMax);

  const auto begin = read_energy(domains);
  ASSERT_TRUE(begin.has_value());
  EXPECT_EQ(begin->energy_uj, (std::vector<uint64_t>{1000, 200, 300, 500}));

  set_energy(domains[0], 3'501'000);  // +3.5 J
  set_energy(domains[1], 200);        // idle
  set_energy(domains[2], 1'000'300);  // +1 J
  set_energy(domains[3], 250'500);    // +0.25 J
  const auto end = read_energy(domains);
  ASSERT_TRUE(end.has_value());
  const auto joules = energy_joules_between(domains, *begin, *end);
  ASSERT_EQ(joules.size(), 4u);
  EXPECT_DOUBLE_EQ(joules[0], 3.5);
  EXPECT_DOUBLE_EQ(joules[1], 0.0);
  EXPECT_DOUBLE_EQ(joules[2], 1.0);
  EXPECT_DOUBLE_EQ(joules[3], 0.25);
}

TEST_F(FakePowercap, HandlesOneWrapAround) {
  zone("intel-rapl:0", "package-0", kMax - 2'000'000, kMax);
  const auto domains = probe_rapl_domains(root_.string(), nullptr);
  ASSERT_EQ(domains.size(), 1u);
  const auto begin = read_energy(domains);
  set_energy(domains[0], 500'000);  // wrapped: 2 J up to the range, 0.5 J after restarting
  const auto end = read_energy(domains);
  ASSERT_TRUE(begin && end);
  const auto joules = energy_joules_between(domains, *begin, *end);
  ASSERT_EQ(joules.size(), 1u);
  EXPECT_DOUBLE_EQ(joules[0], 2.5);
  EXPECT_GT(joules[0], 0.0);  // never a huge or negative number from unsigned underflow
}

TEST_F(FakePowercap, MismatchedReadingsAreRejected) {
  zone("intel-rapl:0", "package-0", 10, 100);
  const auto domains = probe_rapl_domains(root_.string(), nullptr);
  ASSERT_EQ(domains.size(), 1u);
  EXPECT_THROW(energy_joules_between(domains, EnergyReading{{1, 2}}, EnergyReading{{3, 4}}),
               InvalidArgument);
  // A begin value beyond the domain's range cannot have come from it.
  EXPECT_THROW(energy_joules_between(domains, EnergyReading{{500}}, EnergyReading{{5}}),
               InvalidArgument);
}

TEST_F(FakePowercap, UnreadableCounterMakesEnergyUnavailable) {
  zone("intel-rapl:0", "package-0", 1000, kMax);
  zone("intel-rapl:1", "package-1", 1000, kMax);
  fs::remove(root_ / "intel-rapl:1" / "energy_uj");
  std::string reason;
  const auto domains = probe_rapl_domains(root_.string(), &reason);
  // Package-0 alone would be a total that silently misses a socket.
  EXPECT_TRUE(domains.empty());
  EXPECT_NE(reason.find("intel-rapl:1/energy_uj not readable"), std::string::npos) << reason;
  EXPECT_NE(reason.find("No such file"), std::string::npos) << reason;
  EXPECT_FALSE(read_energy(domains).has_value());  // unavailable, not zero joules
}

TEST_F(FakePowercap, GarbledCounterMakesEnergyUnavailable) {
  zone("intel-rapl:0", "package-0", 1000, kMax);
  write(root_ / "intel-rapl:0" / "max_energy_range_uj", "lots");
  std::string reason;
  EXPECT_TRUE(probe_rapl_domains(root_.string(), &reason).empty());
  EXPECT_NE(reason.find("does not hold a counter: 'lots'"), std::string::npos) << reason;
}

TEST_F(FakePowercap, CounterVanishingAfterProbeGivesNoReading) {
  zone("intel-rapl:0", "package-0", 1000, kMax);
  const auto domains = probe_rapl_domains(root_.string(), nullptr);
  ASSERT_EQ(domains.size(), 1u);
  fs::remove(root_ / "intel-rapl:0" / "energy_uj");
  EXPECT_FALSE(read_energy(domains).has_value());
}

TEST_F(FakePowercap, MissingOrEmptyRootExplainsWhy) {
  std::string reason;
  EXPECT_TRUE(probe_rapl_domains(root_.string(), &reason).empty());
  EXPECT_NE(reason.find("intel-rapl:*"), std::string::npos) << reason;
  EXPECT_TRUE(probe_rapl_domains((root_ / "absent").string(), &reason).empty());
  EXPECT_NE(reason.find("cannot list"), std::string::npos) << reason;
  EXPECT_THROW(probe_rapl_domains("", &reason), InvalidArgument);
}

// On this host RAPL may or may not be there; either way the answer must be consistent.
TEST(Energy, HostProbeIsConsistent) {
  std::string reason;
  const auto& domains = rapl_domains(&reason);
  EXPECT_EQ(domains.empty(), !reason.empty()) << reason;
  EXPECT_EQ(read_energy().has_value(), !domains.empty());
  if (!domains.empty()) {
    const auto a = read_energy(), b = read_energy();
    ASSERT_TRUE(a && b);
    for (double j : energy_joules_between(*a, *b)) EXPECT_GE(j, 0.0);
  }
}

}  // namespace d5
