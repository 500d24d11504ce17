#pragma once
// Level 0: operators compiled at run time. compile_custom_op builds user sources written against
// custom_op.h into a shared library (a generated CMake project), caches it by the SHA-256 of
// everything that decides the binary, loads it and wraps it as an Operator
// (docs/custom-operators.md).
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "deep500/op/operator.h"

namespace d5 {

struct CustomOpOptions {
  std::filesystem::path cache_dir;                  // empty: default_custom_op_cache_dir()
  std::vector<std::string> compile_options;         // extra compiler flags ("-march=native"), hashed
  std::vector<std::filesystem::path> include_dirs;  // hashed by path only: list headers that
                                                    // change as sources instead
  std::vector<std::string> link_libraries;          // e.g. "m", hashed
  std::string compiler;                             // empty: $CXX, else the compiler deep500 was built with
  bool force_rebuild = false;
  // Register the operator in OpRegistry::global() under its name on every backend, so graphs
  // that use it run on any executor (register_custom_op). It accepts the compiled problem's input
  // descriptors and refuses others.
  bool register_op = true;
};

// A loaded custom-operator library. Every operator created from it keeps it loaded.
class CustomOpLibrary : public std::enable_shared_from_this<CustomOpLibrary> {
 public:
  struct Symbols;

  // dlopen + entry-point lookup + ABI version check; InvalidArgument when `path` is not a
  // library built against this deep500's custom_op.h.
  static std::shared_ptr<CustomOpLibrary> load(const std::filesystem::path& path);
  ~CustomOpLibrary();
  CustomOpLibrary(const CustomOpLibrary&) = delete;
  CustomOpLibrary& operator=(const CustomOpLibrary&) = delete;

  const std::filesystem::path& path() const { return path_; }
  // One operator for spec.inputs, producing `output_descs` (the C ABI has no shape inference).
  // Attributes are not passed to the library: compile-time parameters are definitions.
  std::unique_ptr<Operator> create(OpSpec spec, std::vector<TensorDesc> output_descs) const;

 private:
  CustomOpLibrary(std::filesystem::path path, void* handle, std::unique_ptr<Symbols> symbols);
  std::filesystem::path path_;
  void* handle_;
  std::unique_ptr<Symbols> symbols_;
};

struct CustomOpBuild {
  std::shared_ptr<CustomOpLibrary> library;
  std::string key;                  // SHA-256 (hex) of sources, definitions, options, compiler, ABI
  std::filesystem::path directory;  // the cache entry
  std::filesystem::path build_log;  // cmake and compiler output of the build
  bool cache_hit = false;           // true when no build ran
};

// Builds (or finds in the cache) and loads a library from `sources` (C++ files; other files
// such as headers are copied next to them and hashed but not compiled). `definitions` become
// -DNAME=VALUE (an empty value: -DNAME). A compilation failure throws InvalidArgument carrying
// the compiler's diagnostics. Safe against concurrent builds of the same key (flock).
CustomOpBuild build_custom_op(const std::string& name, const std::vector<std::filesystem::path>& sources,
                              const std::map<std::string, std::string>& definitions = {},
                              const CustomOpOptions& options = {});

// build_custom_op, then an operator of type `name` for one problem (and, with
// options.register_op, its registration).
std::unique_ptr<Operator> compile_custom_op(const std::string& name,
                                            const std::vector<std::filesystem::path>& sources,
                                            const std::vector<TensorDesc>& input_descs,
                                            const std::vector<TensorDesc>& output_descs,
                                            const std::map<std::string, std::string>& definitions = {},
                                            const CustomOpOptions& options = {});

// $D5_CACHE_DIR, else $XDG_CACHE_HOME/deep500/custom_ops, else ~/.cache/deep500/custom_ops.
std::filesystem::path default_custom_op_cache_dir();
// $D5_INCLUDE_DIR (installed layouts), else the include/ directory of the source tree deep500
// was built from.
std::filesystem::path custom_op_include_dir();
// Builds (cmake runs) started by this process; lets tests and reports tell cache hits apart.
int64_t custom_op_builds();

}  // namespace d5
