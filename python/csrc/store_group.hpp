// The runtime's out-of-band channel over PyTorch's key-value store (the one torchrun or
// init_process_group sets up), so that a flexplan communicator can start without MPI.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <string>
#include <vector>

#include "runtime/bootstrap.hpp"

namespace flexplan::torch_backend {

class StoreGroup final : public bootstrap::Group {
 public:
  // `timeout` bounds every wait for a peer's key: a peer that never comes makes the exchange
  // throw RuntimeError naming it.
  StoreGroup(c10::intrusive_ptr<c10d::Store> store, int rank, int size,
             std::chrono::milliseconds timeout);

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::vector<std::string> allgather(const std::string& mine) override;
  void barrier_start() override;
  bool barrier_done() override;
  std::string launch_hint(int n) const override;

 private:
  c10::intrusive_ptr<c10d::Store> store_;
  int rank_;
  int size_;
  std::chrono::milliseconds timeout_;
  int rounds_ = 0;  // exchanges so far: each uses keys of its own
  int barriers_ = 0;
  bool barrier_failed_ = false;
};

}  // namespace flexplan::torch_backend
