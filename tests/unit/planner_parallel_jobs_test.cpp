// run_jobs (planner/parallel_jobs.hpp): every job runs once, on two threads or one, and a
// failure is reported as a single thread in job order would report it, after every job ran.
#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "planner/parallel_jobs.hpp"

namespace flexplan {
namespace {

TEST(ParallelJobs, EveryJobRunsOnceOnEitherPath) {
  for (const bool beside : {false, true}) {
    std::vector<std::atomic<int>> runs(1000);
    run_jobs(runs.size(), beside, [&](size_t i) { runs[i].fetch_add(1); });
    for (size_t i = 0; i < runs.size(); ++i) EXPECT_EQ(runs[i].load(), 1) << "job " << i << " beside " << beside;
  }
}

TEST(ParallelJobs, OneThreadRunsInOrderOnThisThread) {
  std::vector<size_t> order;
  const auto caller = std::this_thread::get_id();
  run_jobs(5, false, [&](size_t i) {
    EXPECT_EQ(std::this_thread::get_id(), caller);
    order.push_back(i);
  });
  EXPECT_EQ(order, (std::vector<size_t>{0, 1, 2, 3, 4}));
}

TEST(ParallelJobs, TheLowestFailingJobIsReportedAfterAllRan) {
  for (const bool beside : {false, true}) {
    std::atomic<int> ran{0};
    try {
      run_jobs(64, beside, [&](size_t i) {
        ran.fetch_add(1);
        if (i == 40 || i == 7) throw std::runtime_error("job " + std::to_string(i));
      });
      FAIL() << "no failure reported";
    } catch (const std::runtime_error& e) {
      EXPECT_STREQ(e.what(), "job 7");
    }
    EXPECT_EQ(ran.load(), 64);
  }
}

TEST(ParallelJobs, NoJobsIsNothing) {
  run_jobs(0, true, [](size_t) { FAIL() << "a job ran"; });
}

}  // namespace
}  // namespace flexplan
