#pragma once
// Level 3: tensors on a device the communicator cannot reach travel through host memory
// (docs/communicator.md#tensors-on-a-device).
//
// MPI takes host pointers; a gradient of a network training on a GPU lives in GPU memory. Every
// scheme therefore moves its tensors' bytes through these helpers: a tensor the communicator
// reaches (Communicator::reaches) is read and written where it is, any other is copied to host
// memory before the call and back after it, on the device's stream, and the copies are counted in
// the communicator's volume (`staging`) apart from what the ranks exchanged.
#include <cstddef>

#include "deep500/core/tensor.h"
#include "deep500/dist/communication_volume.h"

namespace d5 {

// Copies t's bytes into `host` (t.bytes() of them). A tensor host code may read is copied with
// memcpy and not counted; any other is a staged copy, recorded in `volume` when one is given.
void copy_to_host_memory(const Tensor& t, std::byte* host, CommunicationVolume* volume);
// Copies t.bytes() bytes from `host` into t, counted as above.
void copy_from_host_memory(const std::byte* host, Tensor& t, CommunicationVolume* volume);

// A host copy of t (staged and counted when t is elsewhere) and the copy back into t.
Tensor staged_to_host(const Tensor& t, CommunicationVolume* volume);
void staged_from_host(const Tensor& host, Tensor& t, CommunicationVolume* volume);

}  // namespace d5
