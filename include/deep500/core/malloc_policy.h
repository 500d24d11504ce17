#pragma once
// How the C library's allocator hands memory back to the system (docs/malloc.md).
//
// glibc serves allocations above a threshold (128 KiB, raised as large blocks are freed, up to
// 32 MiB) with mmap and returns them with munmap, and trims free memory at the top of its heap.
// Freshly mapped pages cost a page fault and a zeroing each time they are touched, so a training
// step's time depends on the order in which tensors happened to be freed: two programs doing the
// same ATen calls differed by a third in page faults and 4-6% in step time. `keep` tells glibc to
// serve every size from its heap and never trim it: after the first step, memory is reused
// without faults, and the comparison is of the work, not of the allocator's luck. The price is
// that freed memory stays with the process (its RSS does not shrink).
#include <string>

namespace d5 {

enum class MallocPolicy { system, keep };

// Applies the policy to this process (mallopt); `system` leaves glibc's defaults. Unimplemented
// where the C library has no mallopt.
void set_malloc_policy(MallocPolicy policy);
MallocPolicy malloc_policy();
MallocPolicy parse_malloc_policy(const std::string& name);  // "system" or "keep"; InvalidArgument else
std::string to_string(MallocPolicy policy);

}  // namespace d5
