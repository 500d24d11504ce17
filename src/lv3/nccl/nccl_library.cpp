// NCCL's run-time version in every manifest, beside the one compiled against.
#include <fmt/format.h>
#include <nccl.h>

#include "deep500/core/runtime_libraries.h"
#include "deep500/spi/backend_plugin.h"

namespace d5::dist {

// ncclGetVersion needs no GPU and no communicator.
void register_nccl_library() {
  int v = 0;
  if (ncclGetVersion(&v) != ncclSuccess) return;
  register_runtime_library("nccl", fmt::format("{}.{}.{}", v / 10000, v / 100 % 100, v % 100));
}

}  // namespace d5::dist

namespace d5::plugins {
extern const BackendPlugin nccl;
const BackendPlugin nccl{"nccl", &dist::register_nccl_library, nullptr, nullptr, nullptr};
}  // namespace d5::plugins
