// run_jobs: independent jobs of a large race (pricing its schedules) on this thread and one
// more, with the first failure in job order rethrown, as one thread would report it.
#pragma once

#include <atomic>
#include <cstddef>
#include <exception>
#include <optional>
#include <thread>
#include <vector>

namespace flexplan {

// Runs job(0) .. job(count - 1), each once: on two threads where `beside` and the host has two
// cores or more, else here in order. Every job runs even where one fails (each owns its own
// results); then the failure of the lowest index, if any, is rethrown.
template <class Job>
void run_jobs(size_t count, bool beside, Job&& job) {
  std::vector<std::exception_ptr> failures(count);
  std::atomic<size_t> next{0};
  const auto take = [&] {
    for (size_t i = next.fetch_add(1); i < count; i = next.fetch_add(1)) {
      try {
        job(i);
      } catch (...) {
        failures[i] = std::current_exception();
      }
    }
  };
  {
    std::optional<std::jthread> helper;
    if (beside && count >= 2 && std::thread::hardware_concurrency() >= 2) helper.emplace(take);
    take();
  }
  for (const std::exception_ptr& failure : failures)
    if (failure) std::rethrow_exception(failure);
}

}  // namespace flexplan
