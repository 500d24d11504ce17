// The allocator policy (include/deep500/core/malloc_policy.h).
#include "deep500/core/malloc_policy.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <climits>

#include "deep500/core/error.h"

namespace d5 {

namespace {
MallocPolicy current = MallocPolicy::system;
}

void set_malloc_policy(MallocPolicy policy) {
  if (policy == MallocPolicy::system) {
    // Nothing to undo when nothing was set; after `keep` the process keeps what it holds.
    D5_CHECK_ARG(current == MallocPolicy::system, "the malloc policy cannot go back from keep to system");
    return;
  }
#if defined(__GLIBC__)
  // No mmap'd blocks at all (a 51 MB activation is above any mmap threshold glibc accepts), so
  // every size comes from the heap; an INT_MAX trim threshold keeps freed memory there, and the top
  // pad grows the heap in large steps.
  D5_CHECK(mallopt(M_MMAP_MAX, 0) == 1, Internal, "mallopt(M_MMAP_MAX) failed");
  D5_CHECK(mallopt(M_TRIM_THRESHOLD, INT_MAX) == 1, Internal, "mallopt(M_TRIM_THRESHOLD) failed");
  D5_CHECK(mallopt(M_TOP_PAD, 64 * 1024 * 1024) == 1, Internal, "mallopt(M_TOP_PAD) failed");
  current = policy;
#else
  D5_THROW(Unimplemented, "--malloc keep needs glibc's mallopt; this C library has none (use --malloc system)");
#endif
}

MallocPolicy malloc_policy() { return current; }

MallocPolicy parse_malloc_policy(const std::string& name) {
  if (name == "system") return MallocPolicy::system;
  if (name == "keep") return MallocPolicy::keep;
  D5_THROW(InvalidArgument, "unknown malloc policy '{}' (system, keep)", name);
}

std::string to_string(MallocPolicy policy) { return policy == MallocPolicy::keep ? "keep" : "system"; }

}  // namespace d5
