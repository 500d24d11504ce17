#pragma once
// d5.Network and d5.Executor (net_binding.cpp), shared with the training bindings: an executor
// keeps the network it runs alive, and the optimizers and trainers made for it keep the executor.
#include <memory>

#include "deep500/net/graph_executor.h"
#include "deep500/net/network.h"

namespace d5::python {

class PythonEvents;  // an executor's Python callbacks (net_binding.cpp)

struct PyNetwork {
  std::shared_ptr<Network> net;
};

struct PyExecutor {
  std::shared_ptr<Network> net;
  std::shared_ptr<GraphExecutor> ex;
  std::shared_ptr<PythonEvents> events;
};

}  // namespace d5::python
