// Steps recorded as CUDA graphs (docs/cuda-graphs.md): the StepRecorder behind `--cuda-graphs`.
//
// record() captures the step on a stream of the recorder's own, in thread-local capture mode, with
// the thread's CUDA operators, cuBLAS and cuDNN moved onto that stream (OpStreamScope) and every
// device allocation of the thread served from a pool the recording keeps (AllocationPool): blocks
// the step frees go back to that pool, where nothing outside the recording finds them, so a replay
// writes only memory the recording owns or memory that lived before it (parameters, workspaces,
// the feed buffers). The stream is a blocking one: work on the legacy default stream (the
// optimizers' updates, copies of the feeds, the caller's reads) orders against a replay, and any
// synchronous copy or synchronisation inside the step fails the capture instead of being left out
// of the graph. Such a failure is the refusal record() returns, and the step's work did not run.
// Operators' checks of device values on the host (check_on_host) are kept and run after every
// replay, so a replayed step refuses a bad class index as the same step without a graph does.
#include <fmt/format.h>

#include "cuda_common.h"
#include "deep500/core/device_allocator.h"
#include "deep500/net/step_recorder.h"

namespace d5::cuda {

namespace {

// cuBLAS's recommended workspace on Hopper; smaller GPUs use less of it.
constexpr size_t kCublasWorkspaceBytes = size_t{32} << 20;

std::string runtime_version() {
  int v = 0;
  if (cudaRuntimeGetVersion(&v) != cudaSuccess) return "unknown";
  return fmt::format("{}.{}", v / 1000, (v % 1000) / 10);
}

class CudaGraphRecorder final : public StepRecorder {
 public:
  ~CudaGraphRecorder() override {
    discard();
    if (stream_) cudaStreamDestroy(stream_);
  }

  std::string name() const override { return "CUDA graphs (CUDA runtime " + runtime_version() + ")"; }

  std::string record(const std::function<void()>& step) override {
    discard();
    if (const std::string& why = device_unusable_reason(); !why.empty()) return why;
    check_cuda(cudaSetDevice(kOpDevice), "cudaSetDevice");
    if (!stream_) check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamDefault), "cudaStreamCreateWithFlags");
    auto* caching = dynamic_cast<CachingDeviceAllocator*>(&allocator_for(Device::cuda(kOpDevice)));
    if (!caching) return "the cuda device's allocator keeps no pools, so a graph's memory could be handed out again";
    if (!workspace_) workspace_ = caching->allocate(kCublasWorkspaceBytes, kOpDevice);
    std::shared_ptr<AllocationPool> pool = caching->make_pool(kOpDevice);
    std::string failure;
    cudaGraph_t graph = nullptr;
    {
      CachingDeviceAllocator::PoolScope pool_scope(pool);
      OpStreamScope stream_scope(stream_, workspace_.get(), kCublasWorkspaceBytes);
      DeferredHostChecks deferred(checks_);
      if (const cudaError_t began = cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal);
          began != cudaSuccess) {
        failure = fmt::format("cudaStreamBeginCapture: {}", cudaGetErrorString(began));
      } else {
        try {
          step();
        } catch (const std::exception& e) {
          failure = e.what();
        }
        const cudaError_t ended = cudaStreamEndCapture(stream_, &graph);
        if (failure.empty() && ended != cudaSuccess)
          failure = fmt::format("cudaStreamEndCapture: {}", cudaGetErrorString(ended));
      }
    }
    if (failure.empty()) {
      const cudaError_t made = cudaGraphInstantiate(&exec_, graph, 0);
      if (made != cudaSuccess) failure = fmt::format("cudaGraphInstantiate: {}", cudaGetErrorString(made));
    }
    if (graph) cudaGraphDestroy(graph);
    if (!failure.empty()) {
      checks_.clear();
      cudaGetLastError();  // a failed capture leaves its error as the last one; it is reported here
      exec_ = nullptr;
      return "the step cannot be captured as a CUDA graph: " + failure;
    }
    pool_ = std::move(pool);
    return "";
  }

  bool recorded() const override { return exec_ != nullptr; }

  void replay() override {
    D5_CHECK_ARG(exec_, "no step is recorded");
    check_cuda(cudaGraphLaunch(exec_, stream_), "cudaGraphLaunch");
    // The operators' checks of this replay's values (check_on_host); each read waits for it.
    for (const auto& check : checks_) check();
  }

  // The graph first, then its memory: a replay still running holds on to neither, so wait for it.
  void discard() override {
    if (exec_) {
      cudaStreamSynchronize(stream_);
      cudaGraphExecDestroy(exec_);
      exec_ = nullptr;
    }
    checks_.clear();
    pool_.reset();
  }

 private:
  cudaStream_t stream_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
  std::shared_ptr<AllocationPool> pool_;
  std::shared_ptr<void> workspace_;
  std::vector<std::function<void()>> checks_;  // check_on_host's, run after every replay
};

}  // namespace

void register_graph_recorder() {
  register_step_recorder("cuda", [] { return std::make_unique<CudaGraphRecorder>(); });
}

}  // namespace d5::cuda
