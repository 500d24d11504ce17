#pragma once
// Level 2: the simple dataset formats (docs/datasets.md): IDX files (MNIST, Fashion-MNIST), NPY
// arrays, and synthetic data. The registry (dataset.h) opens them by name; the readers are public
// so tools and tests can inspect files directly.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "deep500/train/dataset.h"

namespace d5 {

// A file's bytes, gunzipped when they start with the gzip magic (1f 8b). Errors: IoError when the
// file cannot be read; FormatError naming the file and the compressed byte offset when the gzip
// stream is corrupt or truncated.
std::vector<uint8_t> read_maybe_gzip_file(const std::string& path);
// The same on bytes already in memory; `what` names them in messages.
std::vector<uint8_t> maybe_gunzip(std::vector<uint8_t> bytes, const std::string& what);

// An IDX array (LeCun's format): a 4-byte magic (0, 0, type, rank), rank big-endian u32 extents,
// then the elements. Only unsigned bytes (type 0x08) are read: the only type MNIST-style sets use.
struct IdxArray {
  std::vector<int64_t> dims;
  std::vector<uint8_t> data;  // row-major, prod(dims) bytes
};
// Reads an IDX file (raw or gzip'd) and checks that it holds exactly `expected_magic`
// (0x00000803 for images, 0x00000801 for labels) and as many bytes as its extents say.
// FormatError naming the file and byte offset otherwise.
IdxArray read_idx_file(const std::string& path, uint32_t expected_magic);
// read_idx_file's checks on an (already gunzipped) IDX file in memory; `what` names it in messages.
IdxArray parse_idx(std::span<const uint8_t> bytes, const std::string& what, uint32_t expected_magic);
inline constexpr uint32_t kIdxImagesMagic = 0x00000803;
inline constexpr uint32_t kIdxLabelsMagic = 0x00000801;

// An NPY array (NumPy format versions 1.0, 2.0 and 3.0). `descr` is the header's dtype string
// ("<f4", "|u1", ...); the data is little-endian and in C order (fortran_order arrays are refused).
struct NpyHeader {
  std::string descr;
  std::vector<int64_t> shape;
  int64_t data_offset = 0;  // where the elements start in the file
  int64_t item_size = 0;
};
// Parses and checks the header of `path` (magic, version, header dict, size against the file
// length). FormatError naming the file and offset on anything malformed or truncated;
// Unimplemented for big-endian data, Fortran order, or a dtype outside f4 f8 u1 i1 i2 u2 i4 i8.
NpyHeader read_npy_header(const std::string& path);
// Writes a C-order NPY 1.0 file of an f32, f64, u8, i8, i32 or i64 tensor (atomically).
void write_npy_file(const std::string& path, const Tensor& tensor);

// The formats behind the registered names, for callers that want one without the registry.
std::unique_ptr<Dataset> open_mnist_dataset(const DatasetSpec& spec);  // "mnist", "fashion-mnist"
std::unique_ptr<Dataset> open_npy_dataset(const DatasetSpec& spec);
std::unique_ptr<Dataset> open_synthetic_dataset(const DatasetSpec& spec, bool learnable);

// "1x28x28" or "1,28,28" -> {1, 28, 28}; InvalidArgument naming `what` otherwise.
std::vector<int64_t> parse_dims(const std::string& text, const std::string& what);

}  // namespace d5
