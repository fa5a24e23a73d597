// ProcessGroupFlexplan: a torch.distributed backend whose all-reduce replays a flexplan plan.
// One thread per group owns the communicator (the runtime is driven by one thread): it creates
// it, issues the queued operations in call order (several outstanding, as DistributedDataParallel
// issues its buckets), drives them and completes their futures. Broadcast, allgather and barrier
// are byte-exact all-reduces (sums of one contribution and zeros); the rest is refused.
#pragma once

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "runtime/communicator.hpp"

namespace flexplan::torch_backend {

// An operation as the communicator thread sees it: a buffer to all-reduce in place, what to do
// before (fill it) and after (copy results out), and the future that reports the outcome.
struct Job {
  at::Tensor buffer;  // contiguous CPU tensor, reduced in place
  DataType type = DataType::UInt8;
  ReduceOp op = ReduceOp::Sum;
  CallInfo call;  // the collective the caller called, for the call signature (a broadcast is an all-reduce here)
  std::function<void()> before;                    // on the communicator thread, before issue
  std::function<std::vector<at::Tensor>()> after;  // after completion: the future's value
  c10::intrusive_ptr<c10::ivalue::Future> future;
};

class WorkFlexplan : public c10d::Work {
 public:
  WorkFlexplan(int rank, c10d::OpType type, c10::intrusive_ptr<c10::ivalue::Future> future);
  bool isCompleted() override;
  bool isSuccess() const override;
  std::exception_ptr exception() const override;
  std::vector<at::Tensor> result() override;
  void synchronize() override {}
  // Blocks until done (the operation's own timeout bounds it); rethrows its error.
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }

 private:
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

class ProcessGroupFlexplan : public c10d::ProcessGroup {
 public:
  // Collective over the store's members: loads `plan_path` (FLEXPLAN_PLAN if empty), checks it
  // on every rank, connects. Options come from the FLEXPLAN_* variables, except that the
  // timeout defaults to `timeout` and blocking mode to on. Throws the same error on every rank.
  ProcessGroupFlexplan(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                       std::chrono::milliseconds timeout, std::string plan_path);
  ~ProcessGroupFlexplan() override;

  const std::string getBackendName() const override { return "flexplan"; }
  const std::string& plan_path() const { return plan_path_; }
  const std::string& learner_name() const { return learner_name_; }

  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;

 private:
  c10::intrusive_ptr<c10d::Work> enqueue(c10d::OpType type, Job job);
  // The communicator thread's loop after creation, until the group is destroyed.
  void run(Communicator& comm);
  // `error`, its timeout named as init_process_group's where that is where it came from (the
  // runtime's messages name FLEXPLAN_TIMEOUT_MS).
  std::exception_ptr naming_timeout_source(std::exception_ptr error) const;

  std::string plan_path_;
  std::string learner_name_;
  // The communicator's timeout when it came from init_process_group(timeout=...), that is
  // when FLEXPLAN_TIMEOUT_MS is not set; none otherwise.
  std::optional<std::chrono::milliseconds> torch_timeout_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Job> queue_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace flexplan::torch_backend
