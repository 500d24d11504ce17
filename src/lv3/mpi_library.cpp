#include <mpi.h>
#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>  // Open MPI's extensions: MPIX_CUDA_AWARE_SUPPORT
#endif

#include <string>

#include "deep500/core/runtime_libraries.h"
#include "deep500/spi/backend_plugin.h"

namespace d5::dist {

// MPI_Get_library_version may be called before MPI_Init (MPI-3.0, sec. 8.1.1).
void register_mpi_library() {
  char buf[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int len = 0;
  MPI_Get_library_version(buf, &len);
  std::string v(buf, static_cast<size_t>(len));
  // Open MPI's string spans several lines; the first names the implementation and version.
  if (auto nl = v.find_first_of("\n,"); nl != std::string::npos) v.resize(nl);
  while (!v.empty() && (v.back() == ' ' || v.back() == '\0')) v.pop_back();
  // Whether the library takes GPU buffers is what decides if GPU tensors must be staged through
  // the host (docs/gpu.md); Open MPI says how it was built, other libraries say nothing.
#if defined(MPIX_CUDA_AWARE_SUPPORT) && MPIX_CUDA_AWARE_SUPPORT
  v += ", built CUDA-aware";
#elif defined(MPIX_CUDA_AWARE_SUPPORT)
  v += ", built without CUDA support";
#endif
  register_runtime_library("mpi", v);
}

}  // namespace d5::dist

namespace d5::plugins {
extern const BackendPlugin mpi;
const BackendPlugin mpi{"mpi", &dist::register_mpi_library, nullptr, nullptr, nullptr};
}  // namespace d5::plugins
