#pragma once
// Atomic file replacement: the content goes to a temporary file in the same directory, is
// flushed to disk, and is renamed over the target. A writer that dies half-way (crash, kill,
// exception) leaves the previous file intact.
#include <functional>
#include <ostream>
#include <string>
#include <string_view>

namespace d5 {

// Throws IoError naming the path and the OS error. If `writer` throws, the temporary file is
// removed and the exception propagates.
void atomic_write(const std::string& path, const std::function<void(std::ostream&)>& writer);
void atomic_write(const std::string& path, std::string_view content);

}  // namespace d5
