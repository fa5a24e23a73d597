// The runtime over a bootstrap group other than MPI (the seam the PyTorch backend uses): ranks
// are threads of one process exchanging through shared memory, no MPI at all.
#include <gtest/gtest.h>

#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "runtime/bootstrap.hpp"
#include "runtime/communicator.hpp"
#include "test_support.hpp"

namespace flexplan {
namespace {

// What the members share: one slot per member per exchange, and a barrier count.
struct Board {
  int size = 0;
  std::mutex mutex;
  std::condition_variable changed;
  std::map<int, std::vector<std::string>> exchanges;
  int barrier = 0;
};

class ThreadGroup final : public bootstrap::Group {
 public:
  ThreadGroup(Board& board, int rank) : board_(board), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return board_.size; }
  std::vector<std::string> allgather(const std::string& mine) override {
    std::unique_lock lock(board_.mutex);
    auto& slots = board_.exchanges[round_];
    slots.resize(static_cast<size_t>(board_.size));
    slots[static_cast<size_t>(rank_)] = "+" + mine;  // "+" marks a slot as written
    board_.changed.notify_all();
    board_.changed.wait(lock, [&] {
      for (const auto& s : board_.exchanges[round_]) if (s.empty()) return false;
      return true;
    });
    std::vector<std::string> out;
    for (const auto& s : board_.exchanges[round_]) out.push_back(s.substr(1));
    ++round_;
    return out;
  }
  void barrier_start() override {
    std::lock_guard lock(board_.mutex);
    ++board_.barrier;
  }
  bool barrier_done() override {
    std::lock_guard lock(board_.mutex);
    return board_.barrier >= board_.size;
  }

 private:
  Board& board_;
  int rank_;
  int round_ = 0;
};

Options test_options() {
  Options options;
  options.allow_host_mismatch = true;  // the ranks are threads of one process, whatever the plan
  options.blocking = true;
  options.timeout = std::chrono::milliseconds(20000);
  return options;
}

TEST(Group, CommunicatorsOverAThreadGroupAllReduce) {
  constexpr int kRanks = 3;
  Board board;
  board.size = kRanks;
  std::vector<std::vector<float>> results(kRanks);
  std::vector<std::string> errors(kRanks);
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r) {
    threads.emplace_back([&, r] {
      try {
        Communicator comm(mpitest::hand_ring_plan(kRanks), std::make_unique<ThreadGroup>(board, r),
                          test_options());
        EXPECT_EQ(comm.rank(), r);
        results[r].assign(1000, static_cast<float>(r + 1));
        Request a = comm.iallreduce(results[r].data(), results[r].data(), 1000, DataType::Float32,
                                    ReduceOp::Sum);
        std::vector<int64_t> ints(7, r);
        comm.allreduce(ints.data(), ints.data(), ints.size(), DataType::Int64, ReduceOp::Max);
        a.wait();
        EXPECT_EQ(ints, std::vector<int64_t>(7, kRanks - 1));
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ(errors[r], "") << "rank " << r;
    EXPECT_EQ(results[r], std::vector<float>(1000, 6.0f)) << "rank " << r;
  }
}

TEST(Group, WrongWorldSizeFailsEveryMemberNamingTheGroupsRanks) {
  Board board;
  board.size = 2;
  std::vector<std::string> errors(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      try {
        Communicator comm(mpitest::hand_ring_plan(3), std::make_unique<ThreadGroup>(board, r),
                          test_options());
      } catch (const InputError& e) {
        errors[r] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < 2; ++r) {
    EXPECT_NE(errors[r].find("the plan is for world size 3 but the job has 2 ranks (start 3 processes)"),
              std::string::npos)
        << "rank " << r << ": " << errors[r];
  }
}

}  // namespace
}  // namespace flexplan
