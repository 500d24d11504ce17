#pragma once
// Facts about this build, compiled in by cmake/gen_build_info.cmake.
#include <map>
#include <string>
#include <vector>

namespace d5 {

struct BuildInfo {
  std::string version;
  std::string git_revision;
  bool git_dirty;
  std::string compiler;
  std::string flags;
  std::string build_type;
  std::string backends;  // comma-separated, as configured
  std::map<std::string, std::string> libraries;  // name -> version compiled against
  // deep500's backends this build was configured without, comma-separated ("cuda,torch").
  std::string not_built_backends;
};

const BuildInfo& build_info();

// deep500's backends this build left out, as a list; and whether `name` is one of them
// (rebuilding with its dependency brings it), as opposed to a name deep500 does not have.
std::vector<std::string> not_built_backends();
bool is_not_built_backend(const std::string& name);
// not_built_backends() for messages: "torch, onednn", or "none".
std::string not_built_list();

}  // namespace d5
