// GoogleTest main for tests run under mpiexec: MPI is initialized before the tests so every rank
// takes part, and each rank's failures are printed with its rank.
#include <gtest/gtest.h>

#include <cstdio>

#include "deep500/dist/mpi_world.h"

namespace {

constexpr double kWatchdogSecondsInTests = 4;

class RankPrefix : public testing::EmptyTestEventListener {
 public:
  explicit RankPrefix(int rank) : rank_(rank) {}
  void OnTestPartResult(const testing::TestPartResult& r) override {
    if (r.failed()) std::fprintf(stderr, "[rank %d] failure in %s:%d\n", rank_, r.file_name(), r.line_number());
  }

 private:
  int rank_;
};

}  // namespace

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  // Shorter than the default so that MpiWatchdog.* can outlast it in a few seconds.
  d5::set_mpi_watchdog_timeout(kWatchdogSecondsInTests);
  auto world = d5::mpi_world();
  // One file of results, rank 0's: every rank runs the same cases, and ranks writing one path
  // would overwrite each other.
  if (world->rank() != 0) GTEST_FLAG_SET(output, "");
  testing::UnitTest::GetInstance()->listeners().Append(new RankPrefix(world->rank()));
  return RUN_ALL_TESTS();
}
