#pragma once
// Checkpoint files: named tensors plus JSON metadata in one binary file (docs/checkpoints.md).
//
// Layout (all integers little-endian):
//   [0, 8)    magic "D5CKPT\r\n" (the CR LF catches text-mode transfers that rewrite line ends)
//   [8, 12)   format version (1)
//   [12, 16)  CRC-32 of the header bytes
//   [16, 24)  header length H in bytes
//   [24, 24+H) header: JSON with every tensor's name, dtype, shape, layout, payload offset,
//             byte count and CRC-32, the payload size, and the caller's metadata
//   padding to a multiple of 64 bytes, then the payload: each tensor's raw bytes at a 64-byte
//   aligned offset, so a reader can map or read tensors straight into aligned buffers.
// Each tensor carries its own CRC-32, so a damaged file is reported with the tensor and byte range
// that changed. Files are written atomically (atomic_file.h): a crash during save leaves the
// previous checkpoint intact.
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "deep500/core/tensor.h"

namespace d5 {

inline constexpr int kCheckpointVersion = 1;

struct Checkpoint {
  std::map<std::string, Tensor> tensors;
  nlohmann::json meta = nlohmann::json::object();
};

// InvalidArgument for an undefined tensor or one not in host memory; IoError when the file
// cannot be written. Tensor bytes are stored exactly (NaN payloads and signed zeros included).
void save_checkpoint(const std::string& path, const std::map<std::string, Tensor>& tensors,
                     const nlohmann::json& meta = nlohmann::json::object());

// IoError when the file cannot be opened; FormatError naming the file and byte offset for a
// wrong magic, an unsupported version, a truncated file, a malformed header or a tensor whose
// bytes fail their CRC-32. Loaded tensors are owned, 64-byte aligned host tensors.
Checkpoint load_checkpoint(const std::string& path);

}  // namespace d5
