// How the flexplan program asks the C library's allocator to keep the memory it frees.
#pragma once

namespace flexplan::cli {

// Large blocks (up to 32 MiB) come from the heap instead of mappings of their own, and freed
// memory stays with the process instead of going back to the system: a million-learner plan
// allocates and frees arrays of a few to tens of MiB again and again (per-rank state of each
// price, each verified schedule), and every fresh mapping is faulted in and zeroed page by page
// (docs/planning-speed.md). A no-op where the C library is not glibc.
void keep_freed_memory();

}  // namespace flexplan::cli
