// Settings of a Communicator. Defaults suit one process per core; FLEXPLAN_* environment
// variables override them (Options::from_env), so jobs can be tuned from the mpirun line.
#pragma once

#include <chrono>
#include <optional>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "codegen/chunking.hpp"
#include "runtime/local_arithmetic.hpp"
#include "runtime/single_copy.hpp"

namespace flexplan {

enum class RankMapping {
  MpiRank,  // plan rank = rank in the MPI communicator
  Name,     // plan rank = the learner whose name this process claims (see learner_name)
};

enum class PeerFailureDetection { Remote, All, None };

enum class SingleCopy { Auto, On, Off };

// What the runtime does with the measured time of its calls (runtime/call_stats.hpp,
// docs/runtime.md "Following the network"): nothing beyond keeping it (Off), report a drift
// that the ranks agree on (Detect), or also re-plan for the links measured (Auto).
enum class Replan { Off, Detect, Auto };

struct Options {
  // An operation that makes no progress for this long while the caller drives it fails with
  // RuntimeError. FLEXPLAN_TIMEOUT_MS.
  std::chrono::milliseconds timeout{30000};
  // Sleep in ucp_worker_wait-style blocking (UCP_FEATURE_WAKEUP) when nothing can move
  // instead of busy-polling; for oversubscribed cores. FLEXPLAN_BLOCKING=0|1.
  bool blocking = false;
  // Blocking mode: how long an idle wait yields its core (sched_yield) before it sleeps; on
  // oversubscribed cores the peer it waits for is likely next in line. FLEXPLAN_YIELD_US.
  std::chrono::microseconds yield_before_sleep{200};
  // Blocking mode: how long an idle wait first polls without yielding. A peer on a core of its
  // own answers a small message within a microsecond or two, and a yield is a system call that
  // delays noticing it; where the job's processes on this host outnumber its cores, the peer
  // needs this core and spinning only delays it. Unset: kAutoSpin where the job's processes
  // on this host are at most its online cores, else none.
  // FLEXPLAN_SPIN_US.
  std::optional<std::chrono::microseconds> spin_before_yield;
  static constexpr std::chrono::microseconds kAutoSpin{20};
  // Pipeline chunk along reduce and broadcast chains: ranges are cut by codegen::chunk_range
  // (chunks of this size; longer only beyond 2^20 chunks per range). Must be equal on every
  // rank (checked at creation). FLEXPLAN_CHUNK_BYTES.
  size_t chunk_bytes = codegen::kDefaultChunkBytes;
  // No longer used: chunks are chunk_bytes long however long the range (above). Kept so that
  // code setting it still compiles; FLEXPLAN_MAX_CHUNKS is no longer read.
  size_t max_chunks_per_range = 0;
  // Chunks in flight per hop (receives posted ahead, sends outstanding). FLEXPLAN_WINDOW.
  unsigned window = 4;
  // Let a rank start a task of a later step as soon as the tasks of earlier steps it depends
  // on (on this rank) finished, instead of once its whole step before has (docs/runtime.md,
  // Overlapping steps): a pipelined tree's slices then move on their own. Results are the same
  // bits either way. Off while drift checks run (FLEXPLAN_REPLAN), which time each step.
  // FLEXPLAN_STEP_OVERLAP=0|1. Local: ranks may differ.
  bool step_overlap = true;
  // With step_overlap: at most this many steps have tasks set up at once on a rank (memory
  // stays bounded; only tasks whose dependencies finished hold chunk windows and scratch). 64:
  // as many slices as the planner's pipelined trees take. FLEXPLAN_STEP_WINDOW, 1 to 1024.
  unsigned step_window = 64;
  // FLEXPLAN_RANK_MAPPING=mpi|name.
  RankMapping rank_mapping = RankMapping::MpiRank;
  // With RankMapping::Name: the learner this process is, as its full name
  // ("switch/m1/gpu2") or a unique '/'-separated tail of it ("m1/gpu2"). Empty: the learner
  // with this process's local rank among the plan's learners on the machine named like this
  // host. FLEXPLAN_LEARNER_NAME.
  std::string learner_name;
  // Run a plan whose machines are not the job's hosts (docs/runtime.md, "The plan's machines and
  // the job's hosts"): by default creation fails on every rank listing both groupings; with this
  // set on every rank it warns once (plan rank 0) and runs. One host standing in for a plan's
  // several machines (tests, trials) needs it. FLEXPLAN_ALLOW_HOST_MISMATCH=0|1.
  bool allow_host_mismatch = false;
  // Which endpoints ask UCX to report a dead peer (UCP_ERR_HANDLING_MODE_PEER), failing
  // operations at once rather than at the timeout. UCX 1.13's shared-memory transports refuse
  // that mode, so by default only endpoints to other hosts use it: on one host data then moves
  // over shared memory, and a dead local peer is caught by the timeout. `All` also covers local
  // peers, at the price of loopback TCP between them. FLEXPLAN_PEER_FAILURE=remote|all|none.
  PeerFailureDetection peer_failure = PeerFailureDetection::Remote;
  // Chunks between processes of one host read straight from the sender's memory
  // (runtime/single_copy.hpp). Auto: when every process can read every other of its host
  // (checked at creation); On: creation fails where one cannot; Off: UCX's shared-memory FIFO.
  // FLEXPLAN_SINGLE_COPY=auto|on|off.
  SingleCopy single_copy = SingleCopy::Auto;
  // The smallest chunk sent by single copy. Must be equal on every rank (checked at creation).
  // FLEXPLAN_SINGLE_COPY_MIN_BYTES.
  size_t single_copy_min_bytes = single_copy::kDefaultMinBytes;
  // A reduce hop reads chunks that come by single copy in parts of this many bytes, adding each
  // part while it is in cache (docs/runtime.md, Single-copy transfers); 0: whole chunks into
  // scratch, then one fold. Local: ranks may differ.
  size_t fused_read_bytes = kDefaultFusedReadBytes;
  static constexpr size_t kDefaultFusedReadBytes = size_t{128} << 10;
  // A library built from `flexplan codegen PLAN --target cpp` for this very plan: the ranks run
  // its generated programs instead of lowering the plan themselves (docs/codegen.md). Creation
  // fails on every rank if it cannot be loaded or was generated for another plan.
  // FLEXPLAN_PROGRAM_LIBRARY.
  std::string program_library;
  // Where local reductions run and where scratch comes from; null: on the host
  // (host_arithmetic()). The staged GPU path sets its CUDA arithmetic here. Not from the
  // environment.
  std::shared_ptr<LocalArithmetic> arithmetic;

  // Following the network (docs/runtime.md). Time every call and step on this rank
  // (Communicator::stats), and print a line per schedule at destruction, from plan rank 0, of
  // measured against predicted time and where it goes. Off (and FLEXPLAN_REPLAN off), no clock
  // is read for calls. FLEXPLAN_STATS=0|1.
  bool stats_report = false;
  // The topology the plan was made from (its hash must be the plan's): it prices each step,
  // and re-planning changes its link figures. Empty: measured times only, no re-planning.
  // FLEXPLAN_TOPOLOGY.
  std::string topology_path;
  // FLEXPLAN_REPLAN=off|detect|auto. Must agree on every rank (checked at creation).
  Replan replan = Replan::Off;
  // Calls of one schedule between two drift checks; the first window is the baseline.
  // FLEXPLAN_DRIFT_WINDOW. Must agree on every rank.
  unsigned drift_window = 20;
  // A window whose measured/predicted ratio exceeds the baseline's by more than this percent
  // (or falls below baseline / (1 + this)) has drifted. FLEXPLAN_DRIFT_PERCENT. Must agree.
  unsigned drift_percent = 50;
  // Hysteresis of FLEXPLAN_REPLAN=auto (docs/runtime.md, Flapping): a drift re-plans only once
  // this many checks of the schedule in a row drifted the same way (FLEXPLAN_REPLAN_CONFIRM,
  // 1 to 100), and switches only where the new plan's predicted time for the calls made, at the
  // measured links, is at least this percent below the current plan's (FLEXPLAN_REPLAN_MIN_GAIN,
  // 0 to 99). Both must agree on every rank.
  unsigned replan_confirm = 2;
  unsigned replan_min_gain = 5;
  // Where a re-plan writes its new plan (plan rank 0 writes). FLEXPLAN_REPLAN_OUT.
  std::string replan_out;

  // Settings that could not be taken, each naming its variable and value
  // ("FLEXPLAN_TIMEOUT_MS='abc': expected a positive integer"); each such setting keeps its
  // default. Creation exchanges them first and fails every rank alike if any rank has one (a
  // throw on one rank alone would leave the others waiting in creation). A caller may add its
  // own (the PyTorch backend: no plan given).
  std::vector<std::string> errors;

  // Defaults, overridden by the FLEXPLAN_* variables that are set. Never throws: a malformed
  // value is recorded in `errors`, for creation to report on every rank.
  static Options from_env();
  // Throws InputError listing `errors`, if any: for a caller that uses the settings without
  // creating a communicator.
  void throw_if_invalid() const;
};

}  // namespace flexplan
