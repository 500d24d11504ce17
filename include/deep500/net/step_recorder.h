#pragma once
// Recording a step once and replaying it (docs/cuda-graphs.md): the interface a device backend
// implements (CUDA graphs in the cuda backend) and ReplayingExecutor drives.
//
// record() runs `step` under recording: on CUDA, the device work it issues is captured, not run.
// Every device allocation the step makes comes from a pool the recording keeps, so a replay
// writes only memory nothing else is handed. replay() issues the recorded work again, ordered
// after the device work issued before it and before the work issued after it, with the same
// kernel arguments and addresses: inputs change only by writing new values into the buffers the
// step read.
#include <functional>
#include <memory>
#include <string>

namespace d5 {

class StepRecorder {
 public:
  virtual ~StepRecorder() = default;
  // What records ("CUDA graphs (CUDA 13.0)"), for reports.
  virtual std::string name() const = 0;
  // Records `step`, replacing any earlier recording. Returns "" on success, else why the step
  // cannot be recorded (a host synchronisation, a copy from host memory, an error the step threw
  // under recording): the recording is then empty, and the step's device work did not run.
  virtual std::string record(const std::function<void()>& step) = 0;
  virtual bool recorded() const = 0;
  // Issues the recording again; InvalidArgument when there is none.
  virtual void replay() = 0;
  // Drops the recording and the memory set aside for it.
  virtual void discard() = 0;
};

using StepRecorderFactory = std::function<std::unique_ptr<StepRecorder>()>;
// Per executor backend ("cuda"); registering again replaces.
void register_step_recorder(const std::string& backend, StepRecorderFactory factory);
// The backend's factory, or an empty function when it has none.
StepRecorderFactory step_recorder_for(const std::string& backend);

}  // namespace d5
