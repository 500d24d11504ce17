// The built-in update rules for parameters on cuda devices (spi/fused_update.h): the records of a
// step go to update_kernels.cu in launches of up to 24 on the device's legacy default stream, the
// stream the operators that computed the gradients ran on, so no synchronisation is needed.
#include <vector>

#include "cuda_common.h"
#include "deep500/core/device_allocator.h"
#include "deep500/spi/fused_update.h"
#include "update_kernels.h"

namespace d5::cuda {
namespace {

// Makes `index` the current device for the scope, as the operators expect cuda:0 afterwards.
class OnDevice {
 public:
  explicit OnDevice(int32_t index) {
    D5_CHECK_ARG(device_unusable_reason().empty(), "updating parameters on cuda:{}: {}", index,
                 device_unusable_reason());
    check_cuda(cudaGetDevice(&previous_), "cudaGetDevice");
    if (index != previous_) check_cuda(cudaSetDevice(index), "cudaSetDevice");
  }
  ~OnDevice() { cudaSetDevice(previous_); }
  OnDevice(const OnDevice&) = delete;
  OnDevice& operator=(const OnDevice&) = delete;

 private:
  int previous_ = 0;
};

class CudaFusedUpdates final : public FusedUpdates {
 public:
  void apply(int32_t index, std::span<const FusedUpdate> updates) override {
    if (updates.empty()) return;
    OnDevice on(index);
    kernels::fused_updates(updates.data(), updates.size(), nullptr);
    check_launch("fused_update_kernel");
  }

  std::vector<double> squared_norms(int32_t index, std::span<const float* const> tensors,
                                    std::span<const int64_t> sizes) override {
    D5_CHECK(tensors.size() == sizes.size(), Internal, "squared_norms: {} tensors, {} sizes", tensors.size(),
             sizes.size());
    std::vector<double> norms(tensors.size(), 0.0);
    if (tensors.empty()) return norms;
    OnDevice on(index);
    int64_t chunks = 0;
    for (int64_t n : sizes) chunks += kernels::norm_chunks(n);
    const std::shared_ptr<void> partials = allocator_for(Device::cuda(index))
                                               .allocate(static_cast<size_t>(chunks) * sizeof(double), index);
    std::vector<double> host(static_cast<size_t>(chunks));
    kernels::chunk_squared_sums(tensors.data(), sizes.data(), tensors.size(),
                                static_cast<double*>(partials.get()), nullptr);
    check_launch("chunk_squares_kernel");
    check_cuda(cudaMemcpy(host.data(), partials.get(), host.size() * sizeof(double), cudaMemcpyDeviceToHost),
               "cudaMemcpy");
    // Each tensor's chunks in order: the same sum every run.
    size_t k = 0;
    for (size_t i = 0; i < sizes.size(); ++i)
      for (int64_t c = 0; c < kernels::norm_chunks(sizes[i]); ++c) norms[i] += host[k++];
    return norms;
  }
};

}  // namespace

void register_fused_updates() { d5::register_fused_updates(DeviceKind::cuda, std::make_shared<CudaFusedUpdates>()); }

}  // namespace d5::cuda
