// The GPU's measured peaks for `d5 peak` and `d5 ops bench` (device_peak.h): the f32 FMA rate of
// dependent chains on every SM, the device-memory bandwidth of a copy far larger than the L2
// cache, and the bf16 tensor-core rate of a large cuBLAS product. Each run is timed with CUDA
// events around the kernels alone, so launch and synchronisation costs stay out of the rate.
#include <cuda_bf16.h>

#include "cuda_common.h"
#include "deep500/metrics/device_peak.h"
#include "peak_kernels.h"

namespace d5::cuda {

namespace {

struct Events {
  cudaEvent_t start = nullptr, stop = nullptr;
  Events() {
    check_cuda(cudaEventCreate(&start), "cudaEventCreate");
    check_cuda(cudaEventCreate(&stop), "cudaEventCreate");
  }
  ~Events() {
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
  }
  Events(const Events&) = delete;
  Events& operator=(const Events&) = delete;
  // Seconds `launch` kept the device busy.
  template <typename F>
  double time(F&& launch) {
    check_cuda(cudaEventRecord(start, nullptr), "cudaEventRecord");
    launch();
    check_cuda(cudaEventRecord(stop, nullptr), "cudaEventRecord");
    check_cuda(cudaEventSynchronize(stop), "cudaEventSynchronize");
    float ms = 0;
    check_cuda(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
    return ms * 1e-3;
  }
};

// Runs `launch` (work `work` per run) under the adaptive runner, each sample work / event time.
PeakMeasurement measure(std::string name, std::string unit, double work, const std::function<void()>& launch,
                        const PeakSettings& s) {
  PeakMeasurement m;
  m.name = std::move(name);
  m.unit = std::move(unit);
  m.isa = "cuda";
  m.work_per_run = work;
  Events ev;
  double rate = 0;
  measure_rate(m, [&] { rate = work / ev.time(launch) * 1e-9; }, s, &rate);
  return m;
}

PeakMeasurement fma_peak(const cudaDeviceProp& p, const PeakSettings& s) {
  DeviceBuffer sink(sizeof(float) * 65536);
  const int threads = 256;
  const int blocks = p.multiProcessorCount * (p.maxThreadsPerMultiProcessor / threads);
  Events ev;
  // Iterations for runs of about run_seconds, from a short run.
  int64_t iters = 4096;
  const double t = ev.time([&] { kernels::fma_chains(sink.as<float>(), blocks, threads, iters, nullptr); });
  iters = std::max<int64_t>(4096, static_cast<int64_t>(static_cast<double>(iters) * s.run_seconds / std::max(t, 1e-7)));
  iters = (iters + kernels::kPeakUnroll - 1) / kernels::kPeakUnroll * kernels::kPeakUnroll;
  const double flops = 2.0 * kernels::kPeakChains * static_cast<double>(iters) * blocks * threads;
  auto m = measure("fma_f32", "GFLOP/s", flops,
                   [&] { kernels::fma_chains(sink.as<float>(), blocks, threads, iters, nullptr); }, s);
  m.threads = blocks * threads;
  m.info = {{"blocks", blocks},        {"threads_per_block", threads}, {"chains", kernels::kPeakChains},
            {"iterations", iters},    {"unrolled", kernels::kPeakUnroll}, {"timing", "CUDA events"}};
  check_launch("fma_chains");
  return m;
}

PeakMeasurement copy_peak(const cudaDeviceProp& p, const PeakSettings& s) {
  // 32 L2 caches' worth per buffer, at least 256 MiB, at most an eighth of the memory each.
  int64_t bytes = std::max<int64_t>(int64_t{256} << 20, int64_t{32} * p.l2CacheSize);
  bytes = std::min<int64_t>(bytes, static_cast<int64_t>(p.totalGlobalMem / 8)) / 16 * 16;
  DeviceBuffer a(static_cast<size_t>(bytes)), b(static_cast<size_t>(bytes));
  check_cuda(cudaMemsetAsync(a.get(), 0, static_cast<size_t>(bytes), nullptr), "cudaMemsetAsync");
  const int blocks = p.multiProcessorCount * 4;
  auto m = measure("copy", "GB/s", 2.0 * static_cast<double>(bytes),
                   [&] { kernels::copy_16b(b.get(), a.get(), bytes, blocks, nullptr); }, s);
  m.info = {{"buffer_bytes", bytes}, {"bytes_counted", "read + written"}, {"timing", "CUDA events"}};
  check_launch("copy_16b");
  return m;
}

PeakMeasurement bf16_tensor_peak(const PeakSettings& s) {
  const int n = 8192;
  const size_t elems = static_cast<size_t>(n) * n;
  DeviceBuffer a(elems * 2), b(elems * 2), c(elems * 2);
  // Zeros would let the tensor cores idle part of their datapath; a constant pattern is enough.
  check_cuda(cudaMemsetAsync(a.get(), 0x3c, elems * 2, nullptr), "cudaMemsetAsync");
  check_cuda(cudaMemsetAsync(b.get(), 0x3c, elems * 2, nullptr), "cudaMemsetAsync");
  const float alpha = 1, beta = 0;
  auto gemm = [&] {
    check_cublas(cublasGemmEx(cublas_handle(), CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha, a.get(), CUDA_R_16BF, n,
                              b.get(), CUDA_R_16BF, n, &beta, c.get(), CUDA_R_16BF, n, CUBLAS_COMPUTE_32F,
                              CUBLAS_GEMM_DEFAULT),
                 "cublasGemmEx (bf16)");
  };
  auto m = measure("tensor_bf16", "GFLOP/s", 2.0 * n * static_cast<double>(n) * n, gemm, s);
  m.isa = "cublas";
  m.info = {{"m_n_k", n}, {"dtype", "bf16 inputs and output, f32 accumulation"}, {"timing", "CUDA events"}};
  return m;
}

DevicePeak measure_gpu_peak(int32_t index, const PeakSettings& s) {
  D5_CHECK(index == kOpDevice, Unimplemented, "the CUDA backend measures cuda:{} only, not cuda:{}", kOpDevice,
           index);
  const std::string& why = device_unusable_reason();
  D5_CHECK(why.empty(), Unimplemented, "cannot measure the GPU's peak: {}", why);
  cudaDeviceProp p{};
  check_cuda(cudaGetDeviceProperties(&p, index), "cudaGetDeviceProperties");
  DevicePeak peak;
  peak.name = p.name;
  // Warm-up: the clocks ramp up under load.
  {
    PeakSettings warm = s;
    warm.max_seconds = s.warmup_seconds;
    (void)fma_peak(p, warm);
  }
  peak.measurements.push_back(fma_peak(p, s));
  peak.measurements.push_back(bf16_tensor_peak(s));
  peak.measurements.push_back(copy_peak(p, s));
  return peak;
}

}  // namespace

void register_gpu_peak() { register_device_peak_measurer(DeviceKind::cuda, &measure_gpu_peak); }

}  // namespace d5::cuda
