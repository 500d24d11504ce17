#pragma once
// ONNX models to d5::Network (library d5_onnx; docs/onnx-import-export.md).
//
// The importer visits each node with the handler of its op type: the handler checks the node
// against ONNX's schema for the model's opset and rewrites the forms d5's operators do not take
// into ones they do. The network keeps the model's opset (Network::opset()), which operators
// read to pick per-opset semantics. After building, initializers that feed a differentiable
// input become parameters (Network::mark_parameters_by_use) and, unless disabled, everything
// computable before execution is folded into constants (Network::fold_constants), so the
// Shape -> Gather -> Unsqueeze -> Concat -> Reshape chains PyTorch exports disappear.
//
// Errors name the model, node and tensor: FormatError for models that are not valid ONNX
// (malformed protobuf, nodes that break their schema, missing initializers, cycles, declared
// shapes that disagree with inference), Unimplemented for valid ONNX that d5 does not import
// (opsets outside 7..22, operators without a handler, non-default domains, sequence types),
// InvalidArgument for what the caller must decide (symbolic dimensions without a value).
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

#include "deep500/net/network.h"

namespace d5 {

struct ImportOptions {
  // Value of every graph input's first dimension when it is symbolic (dim_param or unknown);
  // -1: none given.
  int64_t batch = -1;
  // Values of symbolic dimensions by name ("N" -> 8); they take precedence over `batch`.
  std::map<std::string, int64_t> dims;
  // Full shapes of graph inputs by name, replacing what the model declares.
  std::map<std::string, Shape> input_shapes;
  // Fold what is computable before execution into constant initializers (default), or keep
  // every node of the model.
  bool fold_constants = true;
  // Replace Identity nodes by their input (PyTorch emits one per shared initializer); an
  // Identity that produces a graph output stays.
  bool remove_identities = true;
  // Directory that external-data locations are relative to; import_onnx_file uses the model
  // file's directory when empty. Empty with external data: FormatError asking for it.
  std::string base_dir;
  // Network name; the graph's name (or the file's stem) when empty.
  std::string name;
};

// The lowest and highest default-domain opsets the importer accepts (those d5's operators read).
inline constexpr int kMinImportOpset = 7;
inline constexpr int kMaxImportOpset = 22;
// The newest default-domain opset the ONNX library d5 was built with knows (ONNX 1.12: 17,
// 1.17: 22). The importer checks nodes of the versions it knows against its schemas, and newer
// ones against d5's copy of ONNX's (src/onnx/onnx_newer_schemas.h); the exporter refuses opsets
// newer than it knows, whose models its checker cannot validate.
int onnx_library_opset();

Network import_onnx(const onnx::ModelProto& model, const ImportOptions& options = {});
// IoError when the file cannot be read; errors name the file.
Network import_onnx_file(const std::string& path, const ImportOptions& options = {});

// Op types the importer has a handler for, sorted.
std::vector<std::string> importable_op_types();

}  // namespace d5
