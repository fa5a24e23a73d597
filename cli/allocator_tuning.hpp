// How the flexplan program asks the C library's allocator to keep the memory it frees and to
// back it with huge pages.
#pragma once

namespace flexplan::cli {

// Large blocks (up to 32 MiB) come from the heap instead of mappings of their own, and freed
// memory stays with the process instead of going back to the system: a million-learner plan
// allocates and frees arrays of a few to tens of MiB again and again (per-rank state of each
// price, each verified schedule), and every fresh mapping is faulted in and zeroed page by page
// (docs/planning-speed.md). With `one_heap`, every thread allocates from that one heap (a
// thread's own arena would hand its emptied heaps back), and blocks above 32 MiB come from it
// too, kept for reuse instead of mapped and unmapped each time. A no-op where the C library is not
// glibc; a setting given in GLIBC_TUNABLES is left as given.
void keep_freed_memory(bool one_heap);

// Whether the command line runs like jobs on threads of their own (`whatif`'s sweep plans a
// point per thread): there one heap shared by all would make them wait on each other (+8% on
// asym-3level-a's sweep), and each thread's arena is reused by its next job.
bool plans_on_threads_alike(int argc, char** argv);

// Where the host gives transparent huge pages only to memory that asks for them (the kernel's
// "madvise" mode), runs this program again, once, with glibc's malloc asking for them
// (GLIBC_TUNABLES=glibc.malloc.hugetlb=1, which only the environment at start sets): a
// million-learner plan touches gigabytes, and with 4 KiB pages it spends much of its time in
// page faults and TLB misses. Returns (and the program runs on as it is) where that mode is
// not set, the tunable is already given, or the new start fails.
void ask_for_huge_pages(char** argv);

// Whether a command line may plan or expand a large schedule, which is what the two settings
// above are for. False for the commands that never do (`topo`, `probe`, which runs under a
// launcher and starts the runtime, and a bare --help or --version): they keep the C library's
// defaults and start once.
bool may_plan_at_scale(int argc, char** argv);

}  // namespace flexplan::cli
