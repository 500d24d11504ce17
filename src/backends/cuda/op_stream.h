#pragma once
// The stream the CUDA operators issue their work on, per thread: the legacy default stream, or,
// while a step is recorded as a CUDA graph, the recording's stream (cuda_graph_recorder.cpp), which
// capture requires. Kernel wrappers take a stream; null means this one.
#include <cuda_runtime_api.h>

namespace d5::cuda {

cudaStream_t op_stream();
inline cudaStream_t launch_stream(cudaStream_t s) { return s ? s : op_stream(); }

}  // namespace d5::cuda
