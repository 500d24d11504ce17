// A build without NCCL (include/deep500/dist/nccl.h): GPU tensors are staged through the host.
#include "deep500/core/error.h"
#include "deep500/dist/nccl.h"

namespace d5 {

std::string nccl_build_version() { return ""; }

std::unique_ptr<DeviceCollectives> make_nccl_collectives(Communicator&) {
  D5_THROW(NotBuilt,
           "this d5 was built without NCCL: build it with the CUDA backend where nccl.h and libnccl are found "
           "(a CUDA toolkit's, or PyTorch's nvidia-nccl wheel with -DD5_NCCL_ROOT=...)");
}

}  // namespace d5
