// The communicator's machinery: creation over a bootstrap group (MPI or another), the queue of
// outstanding operations and the progress loop that drives them (in issue order, from the caller's thread), timeouts
// and failure propagation, and the orderly shutdown.
#pragma once

#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "codegen/rank_program.hpp"
#include "ir/plan.hpp"
#include "ir/plan_binary.hpp"
#include "runtime/bootstrap.hpp"
#include "runtime/call_stats.hpp"
#include "runtime/generated_programs.hpp"
#include "runtime/network_watch.hpp"
#include "runtime/operation.hpp"
#include "runtime/options.hpp"
#include "runtime/scratch_pool.hpp"
#include "runtime/sparse_allreduce.hpp"
#include "ir/sparse_exchange.hpp"
#include "ir/sparse_layout.hpp"
#include "runtime/transport.hpp"

namespace flexplan {

// A call as the user made it (communicator.hpp), before the engine maps it onto a schedule.
struct CollectiveCall {
  ir::Collective collective = ir::Collective::AllReduce;  // the schedule it runs
  const void* send = nullptr;
  void* recv = nullptr;
  // Elements per rank: all-reduce, broadcast and reduce, the buffer's; all-gather, each rank's
  // contribution; reduce-scatter, each rank's block of the result.
  uint64_t count = 0;
  // All-gather and reduce-scatter with per-rank counts (the v forms): one per rank; `count`
  // is then unused.
  std::span<const uint64_t> counts = {};
  DataType type = DataType::Float32;
  ReduceOp op = ReduceOp::Sum;
  int32_t root = 0;  // broadcast and reduce
  // What the caller called when it is not `collective` itself (the PyTorch backend's
  // broadcast carried out as an all-reduce); defaults to the collective and root above.
  std::optional<CallInfo> call;
};

// Makes the transport of a rank (transport.hpp) from the engine's choices: blocking, world
// size, the UCX transports to impose (null: UCX's own), eager, copy sends. The default is UCX.
using TransportFactory = std::function<std::unique_ptr<Transport>(bool blocking, int32_t world_size,
                                                                  const char* transports, bool eager,
                                                                  bool copy_sends)>;

class Engine {
 public:
  // `load` produces this rank's verified plan; `source` names it in errors. `make_transport`
  // replaces UCX (tests run the engine over an in-process transport).
  Engine(const std::function<ir::FingerprintedPlan()>& load, const std::string& source,
         std::unique_ptr<bootstrap::Group> group, Options options, TransportFactory make_transport = {});
  ~Engine();

  int32_t rank() const { return rank_; }
  const ir::Plan& plan() const { return plan_; }
  const Options& options() const { return options_; }
  const std::string& learner_name() const { return learner_name_; }
  // Whether chunks to some peer of this host go by single copy.
  bool single_copy() const { return transport_ != nullptr && transport_->single_copy_on(); }

  // Starts a collective (posting its first transfers). Throws InputError on bad arguments or a
  // call the plan has no schedule for (the communicator stays usable), RuntimeError on a broken
  // communicator.
  std::shared_ptr<Operation> start(const CollectiveCall& call);
  void wait(Operation& operation);
  bool test(Operation& operation);
  void force_algorithm(const std::string& algorithm);
  // Blocking sparse all-reduce (runtime/sparse_allreduce.hpp); completes outstanding
  // operations first.
  void sparse_allreduce(const SparseArgs& args);
  // Fails the communicator here and tells every peer (Communicator::abort).
  void abort(const std::string& reason);
  // What the calls cost so far (Communicator::stats).
  CommStats stats() const;
  // Collective, between calls: plan for the links measured and switch if every rank agrees.
  ReplanResult replan();

 private:
  using Clock = std::chrono::steady_clock;

  // Creation, collective: the plan and this process's plan rank, agreed by all ranks (returns
  // the plan rank of each group member), then the transport's connections.
  std::vector<int32_t> load_and_agree(const std::function<ir::FingerprintedPlan()>& load,
                                      const std::string& source,
                                      const bootstrap::HostIdentity& host);
  void connect(const bootstrap::HostIdentity& host, const std::vector<int32_t>& plan_rank_of,
               const TransportFactory& make_transport);
  // Whether chunks between processes of this host go by single copy (single_copy.hpp): every
  // rank probes its host's others and all agree. Collective.
  void setup_single_copy(const std::vector<int32_t>& plan_rank_of);
  // Whether messages carry call signatures (FLEXPLAN_CHECK_CALLS): every rank reads its own,
  // then all must agree, or every rank throws InputError. Collective.
  void agree_on_call_checks(const std::vector<int32_t>& plan_rank_of);
  // UCX_TLS to impose, or nullptr for UCX's own choice (docs/runtime.md, UCX transports).
  const char* default_transports(bool single_host) const;
  struct Outstanding {
    std::shared_ptr<Operation> operation;
    Clock::time_point last_moved;
    bool moved_this_pass = false;
  };

  const ir::Schedule& select(ir::Collective collective, uint64_t bytes, int32_t root, const CallInfo& call);
  // A broadcast or reduce for a root the plan holds no schedule for, where it holds that
  // collective for another root: a pipelined chain through every rank in rank order from the
  // root, derived alike on every rank on first use and verified as a planned one is. Null
  // where the plan lacks the collective altogether.
  const ir::Schedule* derived_schedule(ir::Collective collective, int32_t root);
  // Posts an operation of `schedule` (the checked, translated call).
  std::shared_ptr<Operation> launch(const ir::Schedule& schedule, const OperationArgs& args);
  const codegen::RankProgram& program_for(const ir::Schedule& schedule);
  // One pass: transport progress, then every outstanding operation in issue order. True if
  // anything moved.
  bool progress();
  // Progress passes (sleeping when idle in blocking mode) until `operation` is done or failed.
  void drive(Operation& operation);
  // Whether an outstanding operation waits on a send (blocking mode then sleeps briefly).
  bool any_send_pending() const;
  bool any_send_on_host_pending() const;  // to a peer on this host (shared memory)
  // Until the earliest outstanding operation's timeout (at least 1 ms): an idle sleep's limit.
  std::chrono::milliseconds until_next_deadline() const;
  // Fails every outstanding operation with `why`; the first failure breaks the communicator and,
  // with `tell_peers`, sends every peer an abort notice of it (docs/runtime.md, Abort).
  void fail_all(const std::string& why, bool tell_peers);
  // `failed` is the first failure: records it, tells the peers, fails every other operation.
  void break_on(const Operation& failed);
  void tell_peers(const std::string& cause);
  std::string describe_rank(int32_t rank) const;  // "rank 3 (switch/m1/gpu0)"
  void throw_if_failed(const Operation& operation) const;
  void shutdown();
  // Following the network (network_watch.hpp): loads FLEXPLAN_TOPOLOGY and checks that the
  // ranks agree on the settings. Collective, at creation.
  void setup_watch();
  // Completes every outstanding operation (for an exchange between calls).
  void drain();
  // The drift check of plan schedule `schedule`, due before this call on every rank; true if
  // the plan changed (the caller selects its schedule again).
  bool check_drift(size_t schedule);
  // Every rank plans for `links`, checks that all made the same plan and switches, or keeps the
  // old plan saying why. Collective.
  ReplanResult replan_for(const std::map<int32_t, double>& links, const std::string& cause);
  // Records the calls that finished (their time) as they leave the queue.
  void note_finished(const Operation& operation, Clock::time_point now);
  // The index of `schedule` in plan_.schedules, or npos (a derived schedule).
  size_t plan_index(const ir::Schedule& schedule) const;
  // Progress passes until `remaining()` is 0, for work outside the operation queue (the sparse
  // all-reduce); throws RuntimeError on a broken communicator or no progress within the timeout.
  void drive_until(const std::function<size_t()>& remaining, const std::string& what);

  Options options_;
  ir::Plan plan_;
  int32_t rank_ = 0;
  std::string learner_name_;
  std::unique_ptr<bootstrap::Group> group_;
  std::string forced_algorithm_;
  // Built on the first sparse all-reduce; the exchange is kept only once verified.
  std::optional<ir::SparseLayout> sparse_layout_;
  std::optional<ir::SparseExchange> sparse_exchange_;

  // Scratch outlives the transport, which may read it until its endpoints close.
  ScratchPool pool_;
  std::vector<ScratchPool::Buffer> quarantine_;
  // Call checks (call_signature.hpp), and the sink of their receives (ExecContext::sink),
  // which UCX may write until its endpoints close.
  bool check_calls_ = true;
  std::unique_ptr<std::byte[]> sink_;
  size_t sink_bytes_ = 0;
  SparseScratch sparse_scratch_;
  std::unique_ptr<Transport> transport_;

  std::vector<bool> same_host_;  // by plan rank
  // Options::spin_before_yield, resolved once the processes on this host are known.
  std::chrono::microseconds spin_before_yield_{0};
  // This rank's programs: lowered on first use, or all taken from the generated library at creation.
  std::map<const ir::Schedule*, codegen::RankProgram> programs_;
  std::unique_ptr<GeneratedPrograms> generated_;
  std::deque<Outstanding> outstanding_;
  std::vector<uint64_t> shard_counts_;  // the current call's, reused
  // derived_schedule's, by (collective, root); a deque keeps their addresses, which key programs_.
  std::deque<ir::Schedule> derived_;
  ElementMap shard_check_;              // checks them before a sequence number is spent
  // The newest operations, oldest first, reused by start() once free.
  static constexpr size_t kMaxSpares = 16;
  std::vector<std::shared_ptr<Operation>> spares_;
  uint64_t next_sequence_ = 0;
  // When the runtime last had control: a progress pass, or an idle wait inside wait().
  Clock::time_point last_in_runtime_ = Clock::now();
  std::string broken_;  // the first failure; the communicator refuses work after it
  bool peer_failure_seen_ = false;
  bool abort_seen_ = false;

  // Following the network.
  std::unique_ptr<NetworkWatch> watch_;
  // Whether calls and steps are timed (FLEXPLAN_STATS or FLEXPLAN_REPLAN): off, no clock is read.
  bool timing_ = false;
  std::vector<int32_t> plan_rank_of_;  // by group rank
  uint64_t fingerprint_ = 0;           // of plan_
  // When the last call finished with nothing outstanding: the caller's time starts there.
  std::optional<Clock::time_point> idle_since_;
  // Plans replaced by re-plans, with their programs: a finished operation's Request may still
  // name their schedules.
  std::deque<ir::Plan> retired_plans_;
  // The retired plan that ran while every link was at the topology file's rate, the last time
  // the job left those rates: the plan a restore brings back.
  std::optional<size_t> file_plan_index_;
  std::string last_kept_reason_;  // why the last re-plan kept the old plan ("" after a switch)
  std::deque<std::map<const ir::Schedule*, codegen::RankProgram>> retired_programs_;
};

}  // namespace flexplan
