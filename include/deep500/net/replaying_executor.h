#pragma once
// An executor whose steady-state calls replay a recorded step (docs/cuda-graphs.md):
// make_executor(net, "cuda", {.cuda_graphs = true}) wraps the cuda executor in one.
//
// Per step kind (the loss, each feed's descriptor, the network's version; not where the feeds
// are, since they are copied into the recording's buffers anyway): the first
// call runs the wrapped executor as usual, which chooses algorithms, sizes workspaces and moves
// parameters to the device. The second copies the feeds into buffers of the recording's own on
// the devices that read them and records the wrapped executor's call on those (StepRecorder);
// then it and every later call of that kind copy their feeds into those buffers and replay. A
// replay republishes the recorded gradients in the network and returns copies of the outputs,
// so nothing the caller holds is overwritten by the next replay.
//
// A call runs the wrapped executor instead of replaying, and report() says why, when: it is the
// first of its kind; events are attached (a replay cannot call them per operator, and a
// breakdown wants the per-operator times of the real calls); a node runs on the host (a fallback);
// the recorder refused the step (a host synchronisation inside it). A parameter replaced by
// another tensor (not updated in place) or a changed network is recorded again.
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "deep500/net/graph_executor.h"
#include "deep500/net/step_recorder.h"

namespace d5 {

struct ReplayReport {
  std::string recorder;              // StepRecorder::name()
  int64_t recordings = 0;            // steps recorded
  int64_t replays = 0;               // calls answered by a replay
  int64_t unrecorded_calls = 0;      // calls the wrapped executor ran itself
  std::string last_unrecorded_why;   // why the latest of those did not replay
};

// The report of a ReplayingExecutor as a case's params["cuda_graphs"]; null for any other
// executor.
nlohmann::json replay_report_json(GraphExecutor& ex);

class ReplayingExecutor : public GraphExecutor {
 public:
  ReplayingExecutor(Network& network, std::unique_ptr<GraphExecutor> inner, std::unique_ptr<StepRecorder> recorder);
  ~ReplayingExecutor() override;

  std::string backend() const override { return inner_->backend(); }
  TensorMap inference(const TensorMap& feeds) override { return call(feeds, ""); }
  TensorMap inference_and_backprop(const TensorMap& feeds, const std::string& loss) override {
    return call(feeds, loss);
  }
  std::map<std::string, std::string> implementations() const override { return inner_->implementations(); }
  std::vector<std::pair<std::string, std::string>> fallbacks() const override { return inner_->fallbacks(); }
  ExecutorMemory memory() const override { return memory_; }
  bool backward_event_tensors_persist() const override { return inner_->backward_event_tensors_persist(); }
  std::map<std::string, Device> feed_devices(const std::string& loss = "") override {
    return inner_->feed_devices(loss);
  }
  bool keep_outputs_on_device() override {
    outputs_on_device_ = true;
    return true;
  }

  const ReplayReport& report() const { return report_; }
  GraphExecutor& wrapped() { return *inner_; }

 private:
  // What the recorded call produced: on CUDA, the buffers every replay writes again.
  struct Produced {
    TensorMap outputs, gradients;
  };
  struct Recording {
    std::string kind;
    std::string parameters;  // where each parameter lived when recorded (parameter_places)
    TensorMap feeds;              // on the devices that read them
    std::set<std::string> unread;  // graph inputs the step does not read (kept as they were)
    std::shared_ptr<Produced> produced;
  };
  TensorMap call(const TensorMap& feeds, const std::string& loss);
  TensorMap run_wrapped(const TensorMap& feeds, const std::string& loss, const std::string& why);
  std::string record(const TensorMap& feeds, const std::string& loss);
  TensorMap replay(const TensorMap& feeds, bool copy_feeds);
  TensorMap for_caller(const TensorMap& outputs, int64_t& transfers, int64_t& bytes);
  std::string kind_of(const TensorMap& feeds, const std::string& loss) const;
  std::string parameter_places() const;

  std::unique_ptr<GraphExecutor> inner_;
  std::unique_ptr<StepRecorder> recorder_;
  std::optional<Recording> recording_;
  std::set<std::string> warmed_;                 // step kinds that ran, with the parameters' places after
  std::map<std::string, std::string> refused_;   // step kind -> why it cannot be recorded
  bool outputs_on_device_ = false;
  ExecutorMemory memory_;
  ReplayReport report_;
};

}  // namespace d5
