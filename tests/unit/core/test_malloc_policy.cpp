// The malloc policy: under glibc's defaults a large block is mapped afresh at every allocation
// (a page fault per page touched); under `keep` the second allocation reuses the first one's pages.
// Its own test binary: the policy is process-wide and cannot be undone.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "deep500/core/error.h"
#include "deep500/core/malloc_policy.h"

namespace d5 {
namespace {

long minor_faults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

// Page faults of allocating, writing and freeing 64 MiB (over glibc's largest mmap threshold).
long faults_of_one_block() {
  constexpr size_t kBytes = size_t{64} << 20;
  const long before = minor_faults();
  auto* p = static_cast<volatile char*>(std::malloc(kBytes));
  for (size_t i = 0; i < kBytes; i += 4096) p[i] = static_cast<char>(i);
  std::free(const_cast<char*>(p));
  return minor_faults() - before;
}

TEST(MallocPolicy, KeepReusesFreedPagesWhereTheSystemDefaultFaultsAgain) {
  EXPECT_EQ(malloc_policy(), MallocPolicy::system);
  faults_of_one_block();
  const long system = faults_of_one_block();
  // 16,384 pages of 4 KiB, or 32 of 2 MiB where transparent huge pages are always on.
  EXPECT_GT(system, 20) << "glibc mapped the block afresh: every page faults again";
  set_malloc_policy(MallocPolicy::keep);
  EXPECT_EQ(malloc_policy(), MallocPolicy::keep);
  faults_of_one_block();  // grows the heap once
  const long kept = faults_of_one_block();
  EXPECT_LT(kept, std::max(system / 20, 4L)) << "the second block reuses the first one's pages (system: " << system
                                              << " faults)";
  EXPECT_THROW(set_malloc_policy(MallocPolicy::system), Error);
}

TEST(MallocPolicy, NamesParseAndPrint) {
  EXPECT_EQ(parse_malloc_policy("keep"), MallocPolicy::keep);
  EXPECT_EQ(parse_malloc_policy("system"), MallocPolicy::system);
  EXPECT_EQ(to_string(MallocPolicy::keep), "keep");
  EXPECT_THROW(parse_malloc_policy("jemalloc"), Error);
}

}  // namespace
}  // namespace d5
