#pragma once
// Facts about this build, compiled in by cmake/gen_build_info.cmake.
#include <map>
#include <string>

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
};

const BuildInfo& build_info();

}  // namespace d5
