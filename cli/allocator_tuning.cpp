// keep_freed_memory: glibc's malloc told to reuse freed memory instead of returning it.
#include "allocator_tuning.hpp"

#include <climits>  // (and, with glibc, __GLIBC__)

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace flexplan::cli {

void keep_freed_memory() {
#if defined(__GLIBC__)
  // The largest threshold mallopt takes (half of glibc's 64 MiB heap on 64-bit hosts); above
  // it a block is still mapped on its own and returned when freed.
  constexpr int kLargestHeapBlock = 32 << 20;
  // Fixing either setting also stops glibc from adjusting them as blocks are freed.
  mallopt(M_MMAP_THRESHOLD, kLargestHeapBlock);
  mallopt(M_TRIM_THRESHOLD, INT_MAX);  // the free top of the heap is never given back
#endif
}

}  // namespace flexplan::cli
