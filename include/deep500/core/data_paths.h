#pragma once
// Where deep500 finds the files it ships besides its binaries: headers for custom operators,
// problem suites, recipes, the report's plotting bundles. A build uses its source tree; an
// installed tree (cmake --install, the Debian package) keeps them under PREFIX/include and
// PREFIX/share/deep500, found next to the running executable or next to the libdeep500 it loaded,
// so that an installed d5, a program linked against an installed libdeep500, and the Python
// package (which carries an installed tree) work without the sources. Each lookup's environment
// variable (D5_INCLUDE_DIR, D5_SUITES_DIR, ...) wins.
#include <string>

namespace d5 {

// `$env_var` when set; else PREFIX/`installed_relative` when it exists, PREFIX being the parent
// of the running executable's directory, or else the tree whose LIBDIR holds the libdeep500 this
// code was loaded from; else `source_default` (a build's).
std::string locate_data(const char* env_var, const std::string& source_default, const std::string& installed_relative);

}  // namespace d5
