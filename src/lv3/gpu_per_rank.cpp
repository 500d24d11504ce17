// NCCL's precondition of one GPU per rank, checked before NCCL is asked (include/deep500/dist/nccl.h).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <map>

#include "deep500/dist/nccl.h"

namespace d5 {

std::string gpu_per_rank_reason(const std::vector<std::string>& gpu_ids) {
  std::vector<int> without;
  std::map<std::string, std::vector<int>> ranks_of;
  for (size_t r = 0; r < gpu_ids.size(); ++r) {
    if (gpu_ids[r].empty()) {
      without.push_back(static_cast<int>(r));
    } else {
      ranks_of[gpu_ids[r]].push_back(static_cast<int>(r));
    }
  }
  if (!without.empty()) return fmt::format("no CUDA device on rank(s) {}", fmt::join(without, ", "));
  std::vector<std::string> shared;
  for (const auto& [id, ranks] : ranks_of) {
    if (ranks.size() > 1) shared.push_back(fmt::format("ranks {} share GPU {}", fmt::join(ranks, ", "), id));
  }
  if (shared.empty()) return "";
  return fmt::format("{}; NCCL needs one GPU per rank (give each rank its own, e.g. one rank per GPU of the node)",
                     fmt::join(shared, "; "));
}

}  // namespace d5
