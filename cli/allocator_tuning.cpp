// keep_freed_memory and ask_for_huge_pages: glibc's malloc told to reuse freed memory and to
// back the heap with huge pages.
#include "allocator_tuning.hpp"

#include <climits>  // (and, with glibc, __GLIBC__)
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#if defined(__GLIBC__)
#include <malloc.h>
#include <unistd.h>
#endif

namespace flexplan::cli {

void keep_freed_memory(bool one_heap) {
#if defined(__GLIBC__)
  // The largest threshold mallopt takes (half of glibc's 64 MiB heap on 64-bit hosts); above
  // it a block is still mapped on its own and returned when freed.
  constexpr int kLargestHeapBlock = 32 << 20;
  // Fixing either setting also stops glibc from adjusting them as blocks are freed. One the
  // user gave as a tunable is left as given.
  const char* given = std::getenv("GLIBC_TUNABLES");
  const auto user_set = [&](const char* tunable) { return given != nullptr && std::strstr(given, tunable) != nullptr; };
  if (!user_set("glibc.malloc.mmap_threshold")) mallopt(M_MMAP_THRESHOLD, kLargestHeapBlock);
  // With one heap, not even the blocks above that are mapped on their own: the main heap grows
  // without bound and keeps them for reuse. A million learners' schedules and pricers allocate
  // 1.7 GB in 26 such blocks one after another; each, mapped anew, was faulted in and zeroed
  // by the kernel again (the generated million: 11-13 thousand page faults against 2 thousand
  // kept, peak the same; docs/planning-speed.md).
  if (one_heap && !user_set("glibc.malloc.mmap_max")) mallopt(M_MMAP_MAX, 0);
  if (!user_set("glibc.malloc.trim_threshold"))
    mallopt(M_TRIM_THRESHOLD, INT_MAX);  // the free top of the heap is never given back
  // One heap for every thread: a thread's own arena gives its emptied 64 MiB heaps back to the
  // kernel, so the planner's threads (the other collectives' races, the bases, the encoder)
  // would fault their memory in anew each time (large-10k, all five: 112,000 page faults and
  // twice the CPU, against 2,500 with one arena).
  if (one_heap && !user_set("glibc.malloc.arena_max")) mallopt(M_ARENA_MAX, 1);
#else
  (void)one_heap;
#endif
}

bool plans_on_threads_alike(int argc, char** argv) { return argc >= 2 && std::string(argv[1]) == "whatif"; }

bool may_plan_at_scale(int argc, char** argv) {
  if (argc < 2) return false;  // usage only
  const std::string first = argv[1];
  return first != "topo" && first != "probe" && first != "--help" && first != "-h" && first != "--version";
}

void ask_for_huge_pages(char** argv) {
#if defined(__GLIBC__) && defined(__linux__)
  constexpr const char* kTunable = "glibc.malloc.hugetlb";
  const char* given = std::getenv("GLIBC_TUNABLES");
  if (given != nullptr && std::strstr(given, kTunable) != nullptr) return;  // ours, or the user's
  // "always [madvise] never": the bracketed mode is the kernel's. Under "always" the heap gets
  // huge pages anyway, under "never" asking does nothing.
  std::string modes;
  std::getline(std::ifstream("/sys/kernel/mm/transparent_hugepage/enabled"), modes);
  if (modes.find("[madvise]") == std::string::npos) return;
  const std::string tunables = (given != nullptr && *given != '\0' ? std::string(given) + ":" : std::string()) +
                               kTunable + "=1";
  if (setenv("GLIBC_TUNABLES", tunables.c_str(), 1) != 0) return;
  execv("/proc/self/exe", argv);
  // Not started again: run on as before, without leaving the tunable to child processes.
  if (given != nullptr)
    setenv("GLIBC_TUNABLES", given, 1);
  else
    unsetenv("GLIBC_TUNABLES");
#else
  (void)argv;
#endif
}

}  // namespace flexplan::cli
