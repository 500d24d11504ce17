#pragma once
// Where deep500 finds the files it ships besides its binaries: headers for custom operators,
// problem suites, recipes, the report's plotting bundles. A build uses its source tree; an
// installed tree (cmake --install, the Debian package) keeps them under PREFIX/include and
// PREFIX/share/deep500, found next to the running executable, so an installed d5 works without
// the sources. Each lookup's environment variable (D5_INCLUDE_DIR, D5_SUITES_DIR, ...) wins.
#include <string>

namespace d5 {

// `$env_var` when set; else PREFIX/`installed_relative` when it exists, PREFIX being the parent
// of the running executable's directory (an installed tree); else `source_default` (a build's).
std::string locate_data(const char* env_var, const std::string& source_default, const std::string& installed_relative);

}  // namespace d5
