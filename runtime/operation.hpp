// One collective call in flight (any of the plan's collectives: the engine translates the
// user's call into buffers and an element map): replays a schedule's steps for this rank, every op of the current
// step moving at once, each task's range pipelined in chunks with a bounded window.
//
// Per chunk of a task: a task that receives nothing (a chain's start, a star member sending to
// its root, a star broadcast's root) sends its own data to every destination; a receiver posts
// one receive per source (into scratch slots for reduces, straight into its buffer for a
// broadcast's one source), and once all arrived a reduce combines them with its own data in the
// task's fixed order and sends the result on (or, at the root, writes it), and a broadcast
// member forwards what landed. Tags carry the step, so no barrier is needed.
//
// Overlapping steps: a task of a later step starts as soon as the tasks of earlier steps on this
// rank that it depends on finished (codegen::link_tasks: hazards on the units it reads or
// writes; a send is finished when it completed, a single-copy one when its ack came), not once
// the whole step before it did. A pipelined tree's slices then move on their own: slice j's
// hop does not wait for slice j - 1's hop of the step before on another branch. At most
// ExecContext::steps_in_flight steps have tasks set up at once (a rank enters step s only once
// steps up to s - steps_in_flight are done), which bounds memory; 1 runs step by step, as
// FLEXPLAN_STEP_OVERLAP=0 and drift checks ask. Results are the same bits either way: every
// combine reads the same data in the same order.
//
// Between processes of one host, long chunks go by single copy (single_copy.hpp): the sender
// sends a descriptor instead of the data and its send completes when the receiver's
// acknowledgement arrives; the receiver reads the chunk out of the sender's memory (a reduce
// hop in parts as it folds them, so that the data crosses the cache once: combine_fused).
//
// Every message starts with the call's signature (call_signature.hpp) unless call checks are off:
// a receiver whose peer issued another call fails naming both calls.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "codegen/rank_program.hpp"
#include "ir/plan.hpp"
#include "runtime/call_signature.hpp"
#include "runtime/call_stats.hpp"
#include "runtime/datatype.hpp"
#include "runtime/element_map.hpp"
#include "runtime/scratch_pool.hpp"
#include "runtime/single_copy.hpp"
#include "runtime/transport.hpp"

namespace flexplan {

// What operations share with their communicator.
struct ExecContext {
  Transport* transport;  // the seam (transport.hpp): UCX, or a test's in-process one
  ScratchPool* pool;
  const ir::Plan* plan;
  int32_t rank;
  size_t chunk_bytes;
  unsigned window;
  // By plan rank: whether the peer runs on this host (its messages go through shared memory).
  const std::vector<bool>* same_host;
  // Scratch that the transport may still read after an abort; freed only after the transport closes.
  std::vector<ScratchPool::Buffer>* quarantine;
  LocalArithmetic* arithmetic;    // combines chunks, divides for avg (the pool's memory)
  // Whether every message carries the call's signature (FLEXPLAN_CHECK_CALLS, alike on every rank).
  bool check_calls;
  // Where a receive puts whatever a peer sent beyond what this rank expects (a peer of another
  // count): long enough for any chunk, so that the message still arrives whole, its signature
  // first, and the mismatch is named rather than cut off by UCX as truncated. Never read.
  std::byte* sink;
  size_t sink_bytes;
  // Time the call and each step on this rank (network_watch.hpp); off, no clock is read.
  bool time_steps = false;
  // Also time each transfer, per peer (PeerWaits): only where drift checks use it
  // (FLEXPLAN_REPLAN=detect|auto), not for FLEXPLAN_STATS alone.
  bool time_transfers = false;
  // Reduce hops read single-copy chunks in parts of this many bytes and fold each at once
  // (combine_fused); 0: whole chunks. Options::fused_read_bytes where the arithmetic folds in
  // parts (LocalArithmetic::folds_in_parts), else 0.
  size_t fused_part_bytes = 0;
  // Steps whose tasks may be under way at once on this rank (operation.hpp, Overlapping steps);
  // 1: step by step. Local: ranks may differ.
  unsigned steps_in_flight = 1;
};

// A call as the operation runs it: the engine's translation of the user's call (engine.cpp).
struct OperationArgs {
  const void* send;  // this rank's own data, as the schedule's units span it (== recv in place)
  // Where the result forms, `count` elements; null: in working memory the operation holds (a
  // reduce-scatter's whole buffer, a reduce off its root), of which only the result is kept.
  void* recv;
  size_t count;  // elements the schedule's units span
  DataType type;
  ReduceOp op;
  CallInfo call;  // what the caller called, for the signature and messages
  // Reduce-scatter and all-gather: each rank's elements, its shard's units mapping onto its
  // block (element_map.hpp); empty: unit u is element floor(u * count / units). Read only by
  // the operation's start.
  std::span<const uint64_t> shard_counts = {};
  // Elements [result_begin, result_end) are this rank's result; the rest is working space:
  // only there does the end copy what no step wrote and divide for avg.
  uint64_t result_begin = 0, result_end = UINT64_MAX;
  // Non-null: the result is copied here once the steps are done (out of working memory).
  void* deliver = nullptr;
};

class Operation {
 public:
  Operation(const ExecContext& context, uint64_t sequence, const ir::Schedule& schedule,
            const codegen::RankProgram& program, const OperationArgs& args);
  ~Operation();
  Operation(const Operation&) = delete;
  Operation& operator=(const Operation&) = delete;

  // Whether restart() may take this operation: done, not failed, nothing of it in flight.
  bool reusable() const;
  // Starts a new operation in this one's storage, keeping its vectors' capacity: an operation
  // of the same schedule then allocates nothing (docs/runtime.md, The cost of one operation).
  void restart(uint64_t sequence, const ir::Schedule& schedule, const codegen::RankProgram& program,
               const OperationArgs& args);

  // Moves whatever can move now; true if anything did. A transfer error fails the operation
  // (failed() then holds the message); it never throws.
  bool advance();
  bool done() const { return done_; }
  uint64_t sequence() const { return sequence_; }
  bool failed() const { return !error_.empty(); }
  const std::string& error() const { return error_; }
  // Whether a send of this operation is still in flight; to a peer on this host.
  bool sending() const { return sends_in_flight_ > 0; }
  bool sending_on_host() const { return sends_on_host_in_flight_ > 0; }

  // Fails the operation with `why` (the caller's diagnosis: a timeout, a dead peer), prefixed
  // with what the operation was waiting for; cancels its receives and releases its requests.
  void fail(const std::string& why);
  // "allreduce #7 (ring, 1000 x float32 sum)", "allgather #8 (tree-chains, 5 x 1000 float32)"
  std::string describe() const;
  // What the call cost on this rank (runtime/network_watch.hpp): when it started, its bytes,
  // and each step's seconds from setting up its tasks to their end (0: no task here).
  const ir::Schedule& schedule() const { return *schedule_; }
  std::chrono::steady_clock::time_point started() const { return started_; }
  uint64_t bytes() const { return static_cast<uint64_t>(args_.count) * element_size_; }
  std::span<const double> step_seconds() const { return step_seconds_; }
  // Tasks this call started while an earlier step of it was still under way on this rank
  // (overlapping steps; 0 step by step). For tests and FLEXPLAN_STATS.
  size_t runs_started_ahead() const { return runs_ahead_; }
  // Per peer, what this rank's transfers with it took (call_stats.hpp; time_steps only).
  const PeerWaits& peer_waits() const { return peer_waits_; }

 private:
  enum class ChunkState : uint8_t { Idle, Receiving, Sending, Done };
  struct TaskRun;
  // One message in flight: a chunk's receive from one source or send to one destination. The
  // transport tells its completion through the Completion base (from inside its progress), which
  // queues it on ready_: a pass handles what completed rather than polling every request, so
  // its cost does not grow with the tasks of a step.
  struct Transfer : Transport::Completion {
    Operation* owner = nullptr;
    TaskRun* run = nullptr;  // (stable while the run's step is in flight: its runs never grow then)
    bool ack_send = false;   // an ack this rank sends, of no run
    uint32_t slot = 0;   // index in the run's slots
    uint32_t index = 0;  // a source's index, or sources + a destination's index
    Transport::Request request = nullptr;
    TransportStatus status;  // as told on completion
    size_t length = 0;
    uint64_t tag = 0;
    bool awaiting_ack = false;  // a single-copy send: in flight until the receiver acknowledges
    std::chrono::steady_clock::time_point posted{};  // time_steps: when it was posted
    bool in_flight() const { return request != nullptr || awaiting_ack; }
  };
  // One chunk in flight: its receives from every source, then its sends to every destination.
  struct Slot {
    size_t chunk = 0;  // the chunk it holds
    ChunkState state = ChunkState::Idle;
    size_t pending = 0;               // transfers of the current state not complete yet
    std::vector<Transfer> transfers;  // one per source, then one per destination
    // Reduce receivers: the chunk received from each source; the first then holds the
    // combined data that is sent on.
    std::vector<ScratchPool::Buffer> scratch;
    // Single copy: room for the descriptor received from each source or sent to each
    // destination (by transfer index, descriptor_at); none when single copy is off.
    ScratchPool::Buffer descriptors;
    std::vector<const std::byte*> parts;  // combine_chunk's contributions, in order
    // Reduce receivers, by source: 1 where the chunk came as a checked single-copy descriptor
    // whose data combine_chunk reads in parts (fused_reads), acknowledging it afterwards.
    std::vector<uint8_t> deferred;
    // With call checks, a Frame per transfer (frame_at). Kept across steps and restarts; it
    // goes to quarantine with the scratch when a failure leaves a transfer in flight, since
    // the transport reads a frame's pieces while the message moves.
    ScratchPool::Buffer frames;
  };
  // A message's signature and the pieces it is sent from or received into. A short message is
  // sent from `signature` on, its data copied into `packed` behind it: one contiguous buffer
  // (one piece) keeps UCX's fastest (short) path for small chunks, where an iov send would not.
  struct Frame {
    CallSignature signature;
    std::byte packed[224];
    Transport::Piece iov[Transport::kMaxPieces];
  };
  // Waiting for the tasks it depends on; running; complete but staged, its result landing when
  // its step is done; finished (its dependents may start).
  enum class RunState : uint8_t { Waiting, Running, Complete, Finished };
  struct TaskRun {
    const codegen::Task* task = nullptr;
    size_t step = 0;        // the program step it belongs to
    uint32_t waiting = 0;   // tasks of `after` not finished yet
    RunState state = RunState::Waiting;
    size_t first_element = 0, elements = 0;
    size_t chunk_elements = 0, chunks = 0;
    std::byte* dest = nullptr;       // where this task's result lands (buffer or stage)
    const std::byte* own = nullptr;  // this rank's range as of the step's start
    ScratchPool::Buffer stage;
    size_t lo = 0, hi = 0;  // chunks [lo, hi) are in the window
    std::vector<Slot> slots;
    bool complete() const { return lo == chunks; }
  };

  // The runs of one step in flight: one per task of the program's step, in its order (a task
  // over no element finished at once).
  struct StepRuns {
    size_t step = 0;
    std::vector<TaskRun> runs;
    size_t incomplete = 0;  // runs not complete yet
    bool tasks = false;     // whether any run moves data (only those steps are timed)
  };
  StepRuns& window_at(size_t step) { return window_[step % window_.size()]; }
  // Moves the operation on as far as it can without the transport: accounts completed runs,
  // starts the runs whose dependencies finished, retires done steps and enters new ones; once
  // every step is done, finishes the operation. True if it did anything.
  bool pump();
  // Sets up step `step`'s runs (its copy-in first) and queues those that wait for nothing.
  void enter_step(size_t step);
  // Sets up a run's slots and starts its window.
  void start_run(TaskRun& run);
  // A run's chunks all done: it finishes (now, or with its step where it is staged).
  void run_complete(TaskRun& run);
  // Every run of the step complete: staged results land, and those runs finish.
  void step_complete(StepRuns& step);
  // Marks the run finished and queues its dependents that wait for nothing more.
  void finish_run(TaskRun& run);
  // The oldest step in flight is done: times it, and keeps its runs' storage.
  void retire_step();
  // After the last step: what no step wrote, avg's division, the delivery.
  void finish_steps();
  // Out of place: copies the input's unit ranges, within elements [lo, hi), from the send to the
  // receive buffer.
  void copy_input(const std::vector<codegen::UnitRange>& ranges, uint64_t lo, uint64_t hi);
  // Moves a step's runs to spare_runs_, their buffers already released.
  void retire_runs(std::vector<TaskRun>& runs);
  static void on_completion(Transport::Completion* completion, TransportStatus status, size_t length,
                            uint64_t tag);
  void handle_completion(Transfer& transfer);
  // Retires finished chunks at the window's low end and starts chunks at its high end.
  void slide_window(TaskRun& run);
  void start_chunk(TaskRun& run, size_t chunk);
  void complete_receive(TaskRun& run, Slot& slot, uint32_t source, TransportStatus status, size_t length);
  // All of a chunk's receives arrived.
  void on_received(TaskRun& run, Slot& slot);
  // Reduce: folds the chunk's received data and own data, in the task's order, into `out`.
  void combine_chunk(const TaskRun& run, Slot& slot, std::byte* out);
  // combine_chunk where some sources' data is still in their senders (Slot::deferred): part by
  // part, each read into bounce_ by single copy and folded while in cache; then the acks.
  void combine_fused(const TaskRun& run, Slot& slot, std::byte* out, size_t elements);
  // Whether a reduce's chunk of `bytes` from `peer` is read in parts at the fold rather than
  // whole on arrival (single copy, and an arithmetic that folds in parts).
  bool fused_read(const codegen::Task& task, int32_t peer, size_t bytes) const;
  // Whether the first source's scratch holds a running result or the data sent on, so that it
  // is needed even when that source's data is read in parts.
  static bool needs_partial(const codegen::Task& task) {
    return task.sends() || task.sources.size() + (task.add_own ? 1 : 0) > 2;
  }
  void post_sends(TaskRun& run, Slot& slot, const std::byte* data);
  void finish_chunk(Slot& slot);
  void release_requests();
  static Frame& frame_at(Slot& slot, size_t transfer);
  // Sends `bytes` of `data` to `to` behind the call's signature (call checks on).
  TransportStatus send_framed(Slot& slot, size_t transfer, int32_t to, const std::byte* data, size_t bytes,
                              uint64_t tag, Transfer* completion, Transport::Request* request);
  // Checks the signature a receive brought (call checks on) and takes it off `length`; false,
  // with the error set, if it is not this call's.
  bool check_signature(const TaskRun& run, Slot& slot, uint32_t source, size_t* length);
  // Single copy: whether a chunk of `bytes` to or from `peer` goes so (both ends decide alike).
  bool single_copy(int32_t peer, size_t bytes) const;
  // Sends the descriptor of `data` to destination j; the transfer then awaits the ack.
  void send_descriptor(TaskRun& run, Slot& slot, size_t j, const std::byte* data, size_t bytes);
  // Tells the sender of a chunk read by single copy that its memory is free again.
  bool acknowledge(const TaskRun& run, const Slot& slot, int32_t from, uint64_t cookie);
  // Where a receive from `source` lands: its scratch slot (reduce), else the destination.
  std::byte* receive_target(const TaskRun& run, Slot& slot, uint32_t source) const;
  static std::byte* descriptor_at(Slot& slot, size_t transfer);
  // Keeps one receive posted for this operation's acknowledgements while any are awaited.
  void post_ack_receive();
  void on_ack();
  void on_ack_sent(Transfer& ack);

  size_t chunk_bytes(const TaskRun& run, size_t chunk) const;
  uint64_t tag_of(const codegen::Task& task, const codegen::Link& link, size_t chunk) const;
  std::string where(const TaskRun& run) const;  // step, op and range
  std::string peer(int32_t rank) const;         // "rank 3 (switch/m1/gpu0)"
  bool on_host(int32_t rank) const;
  std::string waiting_for() const;
  void set_error(const std::string& message);

  ExecContext context_;
  uint64_t sequence_;
  const ir::Schedule* schedule_;
  const codegen::RankProgram* program_;
  OperationArgs args_;
  ElementMap map_;  // units to elements of the buffer
  // The buffer when the call gives none (OperationArgs::recv null); quarantined on failure.
  ScratchPool::Buffer work_;
  // combine_fused's parts as they are read, one per deferred source (kept across restarts).
  ScratchPool::Buffer bounce_;
  CallSignature signature_;  // this rank's, which every message of the call carries
  size_t element_size_;
  const std::byte* input_;  // the send buffer (== buffer_ in place)
  std::byte* buffer_;       // the receive buffer, where the result forms
  // Steps [step_lo_, step_hi_) are in flight, step s at window_at(s); the ring's size is
  // steps_in_flight (capacity kept across restarts).
  std::vector<StepRuns> window_;
  size_t step_lo_ = 0, step_hi_ = 0;
  // Runs of finished steps, kept for their slots' storage (a restarted operation reuses them).
  std::vector<TaskRun> spare_runs_;
  // Runs to start (their dependencies finished) and runs whose chunks all completed, in order;
  // pump() takes them from the heads.
  std::vector<TaskRun*> startable_, completed_;
  size_t startable_head_ = 0, completed_head_ = 0;
  size_t runs_ahead_ = 0;
  std::vector<Transfer*> ready_;  // completed, not yet handled
  size_t sends_in_flight_ = 0;
  size_t sends_on_host_in_flight_ = 0;
  // Single-copy sends awaiting their ack, by cookie (the index; free cookies are reused).
  std::vector<Transfer*> awaiting_ack_;
  std::vector<uint64_t> free_cookies_;
  size_t acks_awaited_ = 0;
  Transfer ack_receive_;  // the receive masked to this operation's acks
  // Acks this rank sends that the transport has not sent yet (Transfer::index: the peer); reused once sent.
  // (Owned one by one: the transfers' addresses are the transport's user data; allocated only when used.)
  std::vector<std::unique_ptr<Transfer>> ack_sends_;
  std::vector<Transfer*> free_ack_sends_;
  size_t ack_sends_in_flight_ = 0;
  std::chrono::steady_clock::time_point started_, step_began_;
  std::vector<double> step_seconds_;  // by schedule step (capacity kept across restarts)
  PeerWaits peer_waits_;
  // A transfer with `peer` of `bytes` ended after `seconds` (time_steps only).
  void note_wait(bool send, int32_t peer, size_t bytes, double seconds);
  bool steps_done_ = false;  // every step finished; done_ waits for the acks to leave
  bool done_ = false;
  std::string error_;
};

}  // namespace flexplan
