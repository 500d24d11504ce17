// The oneDNN graph executor: the operator executor preferring oneDNN's operators, with the
// reference implementation for every node oneDNN refuses (the fallback list says which and why).
#include "deep500/net/operator_executor.h"

namespace d5::onednn {

void register_executor() {
  d5::register_executor("onednn",
                        [](Network& network, const ExecutorOptions& o) -> std::unique_ptr<GraphExecutor> {
                          return std::make_unique<OperatorExecutor>(
                              network, "onednn", std::vector<std::string>{"onednn", "reference"},
                              operator_executor_options(o));
                        });
}

}  // namespace d5::onednn
