// A CUDA-aware MPI as the device library (include/deep500/dist/cuda_aware_mpi.h), on 2 and 3
// ranks. d5 hands GPU memory to MPI only when the library says it takes it: its answer is checked
// against Open MPI's own build record (ompi_info), and the refusal, alike on every rank, names
// what is missing. Where the library is CUDA-aware and the ranks have a GPU, the collectives run
// on GPU memory and are checked against the values every rank contributed.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>
#include <cstring>
#include <memory>

#include "../backends/cuda_test_util.h"
#include "deep500/core/tensor.h"
#include "deep500/dist/cuda_aware_mpi.h"
#include "deep500/dist/device_aware_communicator.h"
#include "deep500/dist/mpi_world.h"

namespace d5 {
namespace {

class CudaAwareMpi : public ::testing::Test {
 protected:
  void SetUp() override {
    comm = mpi_world();
    comm->barrier();
  }
  std::shared_ptr<Communicator> comm;
};

// Open MPI's record of how it was built ("true"/"false"), "" where ompi_info is not there (MPICH).
std::string ompi_built_with_cuda() {
  std::unique_ptr<FILE, int (*)(FILE*)> p(popen("ompi_info --parsable --all 2>/dev/null", "r"), pclose);
  if (!p) return "";
  char line[1024];
  const std::string key = "opal_built_with_cuda_support:value:";
  while (std::fgets(line, sizeof line, p.get())) {
    const std::string l(line);
    if (const auto at = l.find(key); at != std::string::npos) return l.substr(at + key.size(), l.find('\n') - at - key.size());
  }
  return "";
}

std::string all_ranks(int n) {
  std::string s;
  for (int r = 0; r < n; ++r) s += (r ? ", " : "") + std::to_string(r);
  return s;
}

std::string mpi_library() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int len = 0;
  MPI_Get_library_version(text, &len);
  return std::string(text, static_cast<size_t>(len));
}

// Each library is asked its own way; Open MPI's answer is checked against its build record.
TEST_F(CudaAwareMpi, TheLibrarysAnswerAgreesWithHowItWasBuilt) {
  const MpiCudaSupport s = mpi_cuda_support();
  const std::string library = mpi_library();
  if (library.rfind("Open MPI", 0) == 0) {
    const std::string built = ompi_built_with_cuda();
    if (built == "false") {
      EXPECT_FALSE(s.aware) << s.says;
      EXPECT_EQ(s.says.rfind("Open MPI: built without CUDA support, MPIX_Query_cuda_support() = ", 0), 0u) << s.says;
    } else if (built == "true") {
      EXPECT_EQ(s.says.rfind("Open MPI: built with CUDA support, MPIX_Query_cuda_support() = ", 0), 0u) << s.says;
    } else {  // no ompi_info to compare with: the answer names the build and the query
      EXPECT_EQ(s.says.rfind("Open MPI: built with", 0), 0u) << s.says;
      EXPECT_NE(s.says.find("MPIX_Query_cuda_support() = "), std::string::npos) << s.says;
    }
  } else if (library.find("MPICH") != std::string::npos) {
    EXPECT_EQ(s.says.rfind("MPICH: MPIX_GPU_query_support(MPIX_GPU_SUPPORT_CUDA) = ", 0), 0u) << s.says;
  } else {
    EXPECT_FALSE(s.says.empty());
  }
}

// Refused alike on every rank, naming what is missing, unless the library is CUDA-aware and
// every rank has a GPU.
TEST_F(CudaAwareMpi, ItServesTheRanksOnlyWhenTheLibraryIsCudaAwareAndEveryRankHasAGpu) {
  const MpiCudaSupport s = mpi_cuda_support();
  const bool gpu = test::no_gpu_reason().empty();
  try {
    auto library = make_cuda_aware_mpi_collectives(*comm);
    EXPECT_TRUE(s.aware && gpu) << s.says;
    EXPECT_EQ(library->name(), "CUDA-aware MPI");
  } catch (const NotBuilt& e) {
    EXPECT_NE(std::string(e.what()).find("needs both MPI and the CUDA backend"), std::string::npos) << e.what();
  } catch (const Unimplemented& e) {
    const std::string what = e.what();
    EXPECT_FALSE(s.aware && gpu) << what;
    EXPECT_EQ(what.rfind("a CUDA-aware MPI cannot serve these ranks: ", 0), 0u) << what;
    EXPECT_EQ(what.find("the MPI library is not CUDA-aware on rank(s) " + all_ranks(comm->size()) + " (" + s.says + ")") !=
                  std::string::npos,
              !s.aware)
        << what;
    EXPECT_EQ(what.find("no CUDA device on rank(s) " + all_ranks(comm->size())) != std::string::npos, !gpu) << what;
  }
  comm->barrier();
}

std::vector<float> read(const Tensor& t) {
  Tensor host = t.to(Device::cpu());
  const auto* p = host.data_as<float>();
  return {p, p + host.numel()};
}

TEST_F(CudaAwareMpi, CollectivesRunOnGpuMemory) {
  D5_REQUIRE_GPU();
  const MpiCudaSupport s = mpi_cuda_support();
  if (!s.aware) GTEST_SKIP() << "the MPI library is not CUDA-aware: " << s.says;
  DeviceAwareCommunicator c(comm, make_cuda_aware_mpi_collectives(*comm));
  const int n = comm->size(), me = comm->rank();
  Tensor host(DType::f32, Shape({3}));
  for (int i = 0; i < 3; ++i) host.data_as<float>()[i] = static_cast<float>((me + 1) * (i + 1));
  Tensor t = host.to(Device::cuda(0));
  ASSERT_TRUE(c.device().holds(t.data()));
  c.allreduce(t, ReduceOp::sum);
  const float ranks_sum = static_cast<float>(n * (n + 1) / 2);
  EXPECT_EQ(read(t), (std::vector<float>{ranks_sum, 2 * ranks_sum, 3 * ranks_sum}));
  c.iallreduce(t, ReduceOp::mean)->wait();  // a mean of equal values is the value
  EXPECT_EQ(read(t), (std::vector<float>{ranks_sum, 2 * ranks_sum, 3 * ranks_sum}));
  Tensor b = host.to(Device::cuda(0));
  c.broadcast(b, n - 1);
  EXPECT_EQ(read(b), (std::vector<float>{static_cast<float>(n), 2.0f * n, 3.0f * n}));
  EXPECT_EQ(c.volume().collectives().at("allreduce").device_calls, 1);
  EXPECT_EQ(c.volume().collectives().at("iallreduce").device_calls, 1);
  EXPECT_EQ(c.volume().staging().copies_to_host, 0);
  comm->barrier();
}

}  // namespace
}  // namespace d5
