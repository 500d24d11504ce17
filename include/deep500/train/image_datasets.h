#pragma once
// The index of an "image-tar" dataset (docs/image-datasets.md): an uncompressed tar whose members
// are <class_dir>/<file>.JPEG. Scanning the headers of a large archive (ImageNet: 1.28M members)
// takes a while, so the index is stored next to the tar as <tar>.d5index and reused while the tar's
// size and modification time match.
#include <cstdint>
#include <string>
#include <vector>

namespace d5 {

struct ImageTarIndex {
  struct Entry {
    uint64_t offset = 0;  // of the member's data in the tar
    uint64_t size = 0;
    int32_t label = 0;    // index into classes
    std::string path;     // member path, for error messages
  };
  uint64_t tar_size = 0;
  int64_t tar_mtime_ns = 0;
  std::vector<std::string> classes;  // sorted class directory names
  std::vector<Entry> entries;        // in archive order
};

// Scans the tar. Members ending in .jpeg / .jpg (any case) are samples; their class is the
// directory directly containing them. A member ending in .tar is read as a nested tar whose JPEGs
// are all of the class named by its stem (the layout of ILSVRC2012_img_train.tar: n01440764.tar,
// ...). Other members are ignored. FormatError for a JPEG outside
// any directory, a damaged tar, or a tar without JPEGs; InvalidArgument for a gzip-compressed tar.
ImageTarIndex build_image_tar_index(const std::string& tar_path);

std::string image_tar_index_path(const std::string& tar_path);  // tar_path + ".d5index"

// The stored index when it is intact and matches the tar's size and mtime; otherwise the index is
// rebuilt and stored (atomically; when the directory is read-only it is kept in memory only).
// `rebuilt`, when given, tells which happened.
ImageTarIndex load_image_tar_index(const std::string& tar_path, bool* rebuilt = nullptr);

// The binary index file format (little-endian), documented in docs/image-datasets.md.
std::string serialize_image_tar_index(const ImageTarIndex& index);
// FormatError naming `what` when the bytes are not an intact index.
ImageTarIndex parse_image_tar_index(const std::string& bytes, const std::string& what);

}  // namespace d5
