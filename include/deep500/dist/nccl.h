#pragma once
// Level 3: NCCL, collectives on GPU memory for the communicator (docs/communicator.md#nccl).
//
// make_nccl_collectives() starts an NCCL communicator over the ranks of a host communicator (MPI
// carries NCCL's unique id from rank 0) on each rank's current GPU; a DeviceAwareCommunicator
// then hands it the allreduces and broadcasts of GPU memory. NCCL needs one GPU per rank (two
// ranks of one communicator on one GPU fail with "Duplicate GPU detected"), so the ranks first
// exchange their GPUs' UUIDs and every rank refuses alike, naming the ranks that share one.
#include <memory>
#include <string>
#include <vector>

#include "deep500/dist/communicator.h"
#include "deep500/dist/device_collectives.h"

namespace d5 {

// The NCCL this binary was built with ("2.27.7"), or "" when it has none.
std::string nccl_build_version();

// Collective over `host`'s ranks. Throws NotBuilt without NCCL, Unimplemented when a rank has no
// CUDA device or ranks share one (gpu_per_rank_reason), IoError when NCCL fails.
std::unique_ptr<DeviceCollectives> make_nccl_collectives(Communicator& host);

// What keeps NCCL from these ranks, "" when nothing does. gpu_ids[r] is rank r's GPU UUID, or
// "" for a rank without a CUDA device.
std::string gpu_per_rank_reason(const std::vector<std::string>& gpu_ids);

}  // namespace d5
