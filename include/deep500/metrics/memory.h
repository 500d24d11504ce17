#pragma once
// Process memory as the OS sees it. Values are bytes; -1 when the OS does not tell us.
#include <cstdint>

namespace d5 {

int64_t current_rss_bytes();  // /proc/self/statm resident pages
int64_t peak_rss_bytes();     // VmHWM from /proc/self/status (falls back to getrusage)
// Resets the kernel's high-water mark (writes 5 to /proc/self/clear_refs) so peak_rss_bytes()
// measures a region. Returns false when the kernel does not allow it; the peak then stays
// process-wide and metrics say so.
bool reset_peak_rss();

}  // namespace d5
