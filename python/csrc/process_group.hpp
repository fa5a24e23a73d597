// ProcessGroupFlexplan: a torch.distributed backend whose collectives replay a flexplan plan.
// One thread per group owns the communicator (the runtime is driven by one thread): it creates
// it, issues the queued operations in call order (several outstanding, as DistributedDataParallel
// issues its buckets), drives them and completes their futures. All-reduce, broadcast, reduce,
// all-gather and reduce-scatter each run their own schedule of the plan; where the plan has none
// (an all-reduce-only plan) they fall back to byte-exact all-reduces, warning once. All-to-all
// is an all-gather of every rank's whole input; barrier a one-byte all-reduce.
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

// An operation as the communicator thread sees it: what to do before issuing (fill buffers,
// taken then so that a tensor changed after the call but before its turn is sent as it was at
// the turn, as with gloo), the issue itself (which may run blocking steps first: all ranks issue
// in the same order), what to do after (copy results out; the future's value), and the future
// that reports the outcome. The lambdas hold the tensors they use.
struct Job {
  std::function<void()> before;
  std::function<Request(Communicator&)> issue;
  std::function<std::vector<at::Tensor>()> after;
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
                       std::chrono::milliseconds timeout, std::string plan_path,
                       bool via_allreduce = false);
  ~ProcessGroupFlexplan() override;

  const std::string getBackendName() const override { return "flexplan"; }
  const std::string& plan_path() const { return plan_path_; }
  const std::string& learner_name() const { return learner_name_; }
  // Whether every collective runs as an all-reduce (the path before native collectives, kept
  // for comparison: Options(via_allreduce=True) or FLEXPLAN_TORCH_VIA_ALLREDUCE=1).
  bool via_allreduce() const { return via_allreduce_; }
  // The collectives that fell back to all-reduces because the plan has no schedule of theirs
  // ("allgather", "broadcast", ...), in the order they first did.
  std::vector<std::string> fallbacks() const;
  // What the calls cost on this rank (Communicator::stats; docs/pytorch.md, Following the
  // network), taken on the communicator thread after the operations issued before it. Local.
  CommStats stats();
  // Communicator::replan in call order with the collectives: collective, every rank alike.
  ReplanResult replan();

  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_split_sizes,
                                               std::vector<int64_t>& input_split_sizes,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;

 private:
  c10::intrusive_ptr<c10d::Work> enqueue(c10d::OpType type, Job job);
  // Runs read(comm) on the communicator's thread, in call order with the collectives, and
  // returns its result: the communicator is driven from that one thread.
  template <typename Result, typename Read>
  Result on_communicator_thread(Read read) {
    auto out = std::make_shared<Result>();
    Job job;
    job.issue = [out, read](Communicator& comm) {
      *out = read(comm);
      return Request();
    };
    job.after = [] { return std::vector<at::Tensor>{}; };
    enqueue(c10d::OpType::UNKNOWN, std::move(job))->wait();
    return *out;
  }
  // Whether a collective runs natively; if the plan lacks it (and all-reduces were not asked
  // for), warns once per collective that it falls back.
  bool native(ir::Collective collective);
  // The shared part of allgather and _allgather_base: gathers `input` into `gathered`
  // (world x input, group rank order) and then runs `done`.
  Job gather_job(const at::Tensor& input, at::Tensor gathered, std::function<std::vector<at::Tensor>()> done);
  // The communicator thread's loop after creation, until the group is destroyed.
  void run(Communicator& comm);
  // `error`, its timeout named as init_process_group's where that is where it came from (the
  // runtime's messages name FLEXPLAN_TIMEOUT_MS).
  std::exception_ptr naming_timeout_source(std::exception_ptr error) const;

  std::string plan_path_;
  std::string learner_name_;
  bool via_allreduce_ = false;
  // Set by the communicator thread before the constructor returns, read-only afterwards.
  // Plan rank of each group rank, and group rank of each plan rank (they differ under
  // FLEXPLAN_RANK_MAPPING=name): the runtime's blocks are in plan rank order, torch's in group's.
  std::vector<int> plan_rank_of_;
  std::vector<int> group_rank_of_;
  bool identity_ranks_ = true;
  // Per collective: whether the plan serves it (broadcast and reduce: from some root).
  bool plans_allgather_ = false;
  bool plans_reduce_scatter_ = false;
  bool plans_broadcast_ = false;
  bool plans_reduce_ = false;
  mutable std::mutex fallback_mutex_;
  std::vector<std::string> fallbacks_;
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
