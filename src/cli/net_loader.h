#pragma once
// Where `d5 net` gets its network: an ONNX file or a model zoo name.
#include <cstdint>
#include <string>

#include "deep500/net/net_bench.h"
#include "deep500/net/network.h"

namespace d5::cli {

struct LoadedNetwork {
  Network network;
  std::string source;  // "onnx:PATH" or "zoo:NAME"
  std::string loss;    // the loss tensor for train-step, when the source knows it ("" otherwise)
};

// `model` is a path to an .onnx file, or a zoo model name. batch fills the first dimension of the
// inputs; train-step builds zoo models with their loss and in training mode. IoError/FormatError
// for unreadable or malformed files, InvalidArgument for an unknown name.
LoadedNetwork load_network(const std::string& model, int64_t batch, NetMode mode);

}  // namespace d5::cli
