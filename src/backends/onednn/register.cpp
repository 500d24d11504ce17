#include <omp.h>

#include <fmt/format.h>

#include "deep500/core/backend.h"
#include "deep500/core/runtime_libraries.h"
#include "deep500/spi/backend_plugin.h"
#include "onednn_common.h"

namespace d5::onednn {

void register_backend() {
  const dnnl_version_t* v = dnnl_version();
  BackendInfo b;
  b.name = "onednn";
  b.description = "oneDNN primitives (CPU)";
  b.version = fmt::format("{}.{}.{}", v->major, v->minor, v->patch);
  // This oneDNN runs on the OpenMP runtime, so d5::set_num_threads already governs it through
  // omp_set_num_threads; the backend only reports what it will use.
  b.get_threads = [] { return omp_get_max_threads(); };
  register_runtime_library("onednn", fmt::format("{} ({})", b.version, v->hash ? v->hash : ""));
  d5::register_backend(std::move(b));
}

// The one list of oneDNN operator families.
void register_operators(OpRegistry& r) {
  register_eltwise_ops(r);
  register_binary_ops(r);
  register_softmax_concat_ops(r);
  register_norm_ops(r);
  register_conv_ops(r);
  register_pool_ops(r);
  register_matmul_ops(r);
}

void register_executor();  // executor.cpp

}  // namespace d5::onednn

namespace d5::plugins {
extern const BackendPlugin onednn;
const BackendPlugin onednn{"onednn", &d5::onednn::register_backend, &d5::onednn::register_operators,
                           &d5::onednn::register_executor, nullptr};
}  // namespace d5::plugins
