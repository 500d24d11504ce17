#pragma once
// Versions of libraries as reported at run time (which can differ from the headers compiled
// against when a shared library is upgraded). Optional components register theirs.
#include <map>
#include <string>

namespace d5 {

void register_runtime_library(const std::string& name, const std::string& version);
const std::map<std::string, std::string>& runtime_libraries();

}  // namespace d5
