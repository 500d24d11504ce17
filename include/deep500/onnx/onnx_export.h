#pragma once
// d5::Network to ONNX (library d5_onnx; docs/onnx-import-export.md).
//
// The model imports the network's opset of the default domain (and version 1 of any other domain
// its nodes use), with the IR version that opset was released with. Nodes are written in
// topological order with their attributes, initializers with their current values (trained
// parameters included), graph inputs and outputs with the descriptors inference derives.
// Constants that a differentiable input reads (folded values such as an LSTM's zero initial state,
// a constant divisor) become Constant nodes, since importers take initializers there for
// parameters. The d5
// spelling of an opset's forms is turned back into ONNX's (BatchNormalization's training mode
// before opset 14), so that importing the model gives the same network again.
//
// InvalidArgument naming the node when the network does not infer, or a default-domain node has no
// ONNX schema at the network's opset (Gelu before opset 20, d5-only ops such as MSELoss), or the
// opset is newer than the linked ONNX library knows (onnx_library_opset()); the written model
// passes onnx.checker.check_model(full_check=True).
#include <cstdint>
#include <string>

#include <onnx/onnx_pb.h>

#include "deep500/net/network.h"

namespace d5 {

struct ExportOptions {
  // export_onnx_file: initializers of at least this many bytes go to one external data file next
  // to the model (ONNX's external data; 0: every initializer), which keeps models above protobuf's
  // 2 GiB limit writable. -1: everything inside the model.
  int64_t external_data_threshold = -1;
  // The external data file's name, relative to the model's directory; "<model file name>.data"
  // when empty.
  std::string external_data_file;
  std::string producer_name = "deep500";
  std::string doc_string;
};

// The IR version ONNX released together with the opset (opset 7 -> 3, ..., 17 -> 8, 19 -> 9,
// 21 -> 10).
int64_t ir_version_for_opset(int opset);

// Everything inline (external_data_threshold does not apply).
onnx::ModelProto export_onnx(const Network& net, const ExportOptions& options = {});
// IoError when the file (or its external data) cannot be written.
void export_onnx_file(const Network& net, const std::string& path, const ExportOptions& options = {});

}  // namespace d5
