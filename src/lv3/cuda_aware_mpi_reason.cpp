// A CUDA-aware MPI's preconditions, checked on every rank alike (include/deep500/dist/cuda_aware_mpi.h).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "deep500/dist/cuda_aware_mpi.h"

namespace d5 {

namespace {

std::vector<int> ranks_without(const std::vector<int>& flags) {
  std::vector<int> ranks;
  for (size_t r = 0; r < flags.size(); ++r)
    if (flags[r] == 0) ranks.push_back(static_cast<int>(r));
  return ranks;
}

}  // namespace

std::string cuda_aware_mpi_reason(const std::vector<int>& aware, const std::vector<int>& has_gpu,
                                  const std::string& says) {
  std::vector<std::string> reasons;
  if (const auto r = ranks_without(aware); !r.empty())
    reasons.push_back(fmt::format("the MPI library is not CUDA-aware on rank(s) {} ({})", fmt::join(r, ", "), says));
  if (const auto r = ranks_without(has_gpu); !r.empty())
    reasons.push_back(fmt::format("no CUDA device on rank(s) {}", fmt::join(r, ", ")));
  return fmt::format("{}", fmt::join(reasons, "; "));
}

}  // namespace d5
