// The CUDA graph executor: the operator executor preferring the CUDA operators, with the
// reference implementation for every node they refuse (on the host; the fallback list says which
// and why). Parameters whose readers all run on the GPU live there (resident_parameters): a
// training step's gradients are summed and published on the device and the built-in optimizers
// update them there, so a steady-state step copies only the feeds and the outputs read back.
#include "deep500/net/operator_executor.h"

namespace d5::cuda {

void register_graph_recorder();  // cuda_graph_recorder.cpp: --cuda-graphs

void register_executor() {
  register_graph_recorder();
  d5::register_executor("cuda", [](Network& network, const ExecutorOptions& o) -> std::unique_ptr<GraphExecutor> {
    OperatorExecutorOptions options = operator_executor_options(o);
    options.resident_parameters = true;
    return std::make_unique<OperatorExecutor>(network, "cuda", std::vector<std::string>{"cuda", "reference"},
                                              options);
  });
}

}  // namespace d5::cuda
