#include "runtime/engine.hpp"

#include <sched.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>

#include <algorithm>
#include <limits>
#include <optional>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "ir/collective_contract.hpp"
#include "ir/plan_binary.hpp"
#include "topology/topology.hpp"
#include "ir/verify.hpp"
#include "runtime/bootstrap.hpp"
#include "runtime/errors.hpp"
#include "runtime/tag.hpp"

namespace flexplan {

namespace {
// Blocking mode's longest sleep on the worker's event fd while only receives are pending: an
// arriving message wakes it, so the cap only bounds how late the timeout is checked.
constexpr auto kMaxSleep = std::chrono::milliseconds(100);
// ... and while any send to another host is pending (one to this host keeps the rank
// yielding, see drive()): UCX 1.13's TCP transport arms its event fd for incoming
// data only, so a send whose socket drains wakes nobody, and the rest of its message (and the
// pipeline behind it) would wait for the next arrival or kMaxSleep.
constexpr auto kSendPendingSleep = std::chrono::milliseconds(1);
// How long a failing rank waits for its abort notices to leave.
constexpr auto kAbortSendLimit = std::chrono::milliseconds(500);

// Whether `processes` (this job's on this host) fit the host's online cores, one each. Not this
// process's affinity: a launcher that binds each rank to a core of its own (mpirun does for
// two ranks) leaves one core in each mask.
bool processes_have_cores(size_t processes) {
  const long cores = sysconf(_SC_NPROCESSORS_ONLN);
  return cores > 0 && processes <= static_cast<size_t>(cores);
}
}  // namespace

Engine::Engine(const std::function<ir::FingerprintedPlan()>& load, const std::string& source,
               std::unique_ptr<bootstrap::Group> group, Options options, TransportFactory make_transport)
    : options_(std::move(options)),
      group_(std::move(group)),
      pool_(options_.arithmetic ? *options_.arithmetic : host_arithmetic()) {
  options_.window = std::max(options_.window, 1u);
  options_.chunk_bytes = std::max<size_t>(options_.chunk_bytes, 1);
  try {
    const auto host = group_->host_identity();  // collective: before anything can fail
    const auto plan_rank_of = load_and_agree(load, source, host);
    connect(host, plan_rank_of, make_transport ? make_transport : TransportFactory(&make_ucx_transport));
    plan_rank_of_ = plan_rank_of;
    setup_watch();
  } catch (...) {
    transport_.reset();
    throw;
  }
}

std::vector<int32_t> Engine::load_and_agree(const std::function<ir::FingerprintedPlan()>& load,
                                            const std::string& source,
                                            const bootstrap::HostIdentity& host) {
  const int member_rank = group_->rank();
  std::string error;
  uint64_t fingerprint = 0;
  try {
    ir::FingerprintedPlan loaded = load();
    plan_ = std::move(loaded.plan);
    fingerprint = loaded.fingerprint;
    bootstrap::check_tag_limits(plan_);
    rank_ = bootstrap::plan_rank_for(plan_, options_, member_rank, host);
    if (!options_.program_library.empty()) {
      // Generated code instead of lowering: loaded and checked here, so that a library made for
      // another plan fails creation on every rank.
      generated_ = std::make_unique<GeneratedPrograms>(options_.program_library, plan_);
      for (size_t s = 0; s < plan_.schedules.size(); ++s)
        codegen::link_tasks(programs_.emplace(&plan_.schedules[s], generated_->program(s, rank_)).first->second);
    }
  } catch (const std::exception& e) {
    error = fmt::format("plan '{}': {}", source, e.what());
  }
  bootstrap::raise_if_any_failed(*group_, error, "loading the plan", /*bad_input=*/true);
  fingerprint_ = fingerprint;
  auto plan_rank_of = bootstrap::agree_on_plan(
      *group_,
      {plan_.world_size, plan_.topology_hash, fingerprint, options_.chunk_bytes, rank_});
  if (static_cast<size_t>(rank_) < plan_.rank_names.size()) {
    learner_name_ = plan_.rank_names[static_cast<size_t>(rank_)];
  }
  // The plan's machines against the job's hosts: an error unless every rank allows a mismatch.
  const std::string mismatch =
      bootstrap::check_hosts(*group_, plan_, plan_rank_of, host.host, options_.allow_host_mismatch);
  if (!mismatch.empty() && rank_ == 0) {
    std::fprintf(stderr, "flexplan: warning: the plan's machines are not the job's hosts "
                         "(FLEXPLAN_ALLOW_HOST_MISMATCH): %s\n", mismatch.c_str());
  }
  return plan_rank_of;
}

const char* Engine::default_transports(bool single_host) const {
  // The user's choice stands; so does UCX's own for jobs across hosts.
  if (!single_host || std::getenv("UCX_TLS") != nullptr) return nullptr;
  // Peer-failure mode everywhere: only TCP supports it between local processes (UCX 1.13).
  if (options_.peer_failure == PeerFailureDetection::All) return "tcp,self";
  // Shared memory without CMA. Outside peer-failure mode a CMA read from a peer that died makes
  // UCX abort the reader, where the shared-memory FIFOs just stall and the runtime reports the
  // dead peer cleanly. (Excluding only CMA, "^cma", lets UCX pick loopback TCP for rendezvous,
  // 3-8x slower at 32 KB - 2 MB here.)
  return "posix,sysv,self";
}

void Engine::connect(const bootstrap::HostIdentity& host, const std::vector<int32_t>& plan_rank_of,
                     const TransportFactory& make_transport) {
  const auto hosts = bootstrap::exchange_by_plan_rank(
      *group_, std::vector<uint8_t>(host.host.begin(), host.host.end()), plan_rank_of);
  const bool single_host = std::all_of(hosts.begin(), hosts.end(), [&](const auto& h) { return h == hosts[0]; });
  std::string error;
  std::vector<uint8_t> address;
  try {
    // Every chunk goes eager (docs/runtime.md, Eager chunks). With every endpoint in
    // peer-failure mode (loopback TCP on one host), sends copy: UCX 1.13's TCP zero-copy path
    // can abort a sender whose peer dies (docs/runtime.md, Timeouts and errors).
    const bool copy_sends = options_.peer_failure == PeerFailureDetection::All;
    transport_ = make_transport(options_.blocking, plan_.world_size, default_transports(single_host),
                                /*eager=*/true, copy_sends);
    address = transport_->address();
  } catch (const std::exception& e) {
    error = e.what();
  }
  bootstrap::raise_if_any_failed(*group_, error, "starting UCX");
  const auto addresses = bootstrap::exchange_by_plan_rank(*group_, address, plan_rank_of);
  same_host_.resize(hosts.size());
  for (size_t peer = 0; peer < hosts.size(); ++peer) {
    same_host_[peer] = hosts[peer] == hosts[static_cast<size_t>(rank_)];
  }
  spin_before_yield_ = options_.spin_before_yield.value_or(
      processes_have_cores(static_cast<size_t>(std::count(same_host_.begin(), same_host_.end(), true)))
          ? Options::kAutoSpin
          : std::chrono::microseconds(0));
  // Peer-failure mode where asked for: UCX 1.13 keeps shared memory out of it (options.hpp).
  std::vector<bool> detect_failure(hosts.size());
  for (size_t peer = 0; peer < hosts.size(); ++peer) {
    detect_failure[peer] = options_.peer_failure == PeerFailureDetection::All ||
                           (options_.peer_failure == PeerFailureDetection::Remote &&
                            hosts[peer] != hosts[static_cast<size_t>(rank_)]);
  }
  try {
    transport_->connect(addresses, rank_, detect_failure);
  } catch (const std::exception& e) {
    error = e.what();
  }
  bootstrap::raise_if_any_failed(*group_, error, "connecting UCX endpoints");
  setup_single_copy(plan_rank_of);
  agree_on_call_checks(plan_rank_of);
}

void Engine::agree_on_call_checks(const std::vector<int32_t>& plan_rank_of) {
  std::string error;
  check_calls_ = check_calls_from_env(&error);
  bootstrap::raise_if_any_failed(*group_, error, "reading FLEXPLAN_CHECK_CALLS", /*bad_input=*/true);
  // Both ends of every message must agree on whether it starts with a signature.
  const auto all = bootstrap::exchange_by_plan_rank(*group_, {static_cast<uint8_t>(check_calls_)}, plan_rank_of);
  std::vector<size_t> on, off;
  for (size_t r = 0; r < all.size(); ++r) (!all[r].empty() && all[r][0] != 0 ? on : off).push_back(r);
  if (!on.empty() && !off.empty()) {
    throw InputError(fmt::format("flexplan: the ranks disagree on FLEXPLAN_CHECK_CALLS: on at ranks {}, off at ranks {}",
                                 fmt::join(on, ", "), fmt::join(off, ", ")));
  }
  if (!check_calls_) return;
  // A receive's sink takes what a peer of another count sends beyond this rank's chunk: at most
  // a whole chunk (codegen::chunk_range: chunk_bytes, or one element of up to 8 bytes), or a
  // single-copy descriptor. Uninitialised: it is only ever written.
  sink_bytes_ = std::max<size_t>(options_.chunk_bytes, 8) + sizeof(single_copy::Descriptor);
  sink_.reset(new std::byte[sink_bytes_]);
}

void Engine::setup_single_copy(const std::vector<int32_t>& plan_rank_of) {
  // Every process tries to read every other of its host, then all learn all the verdicts, so
  // that both ends of every link decide alike.
  const bool wanted = options_.single_copy != SingleCopy::Off;
  const std::string target = wanted ? single_copy::publish_probe_target() : std::string();
  const auto targets = bootstrap::exchange_by_plan_rank(
      *group_, std::vector<uint8_t>(target.begin(), target.end()), plan_rank_of);
  std::string why_not;
  if (!wanted) why_not = "FLEXPLAN_SINGLE_COPY=off";
  for (size_t peer = 0; peer < targets.size() && why_not.empty(); ++peer) {
    // A peer that publishes nothing has single copy off and says so itself.
    if (!same_host_[peer] || peer == static_cast<size_t>(rank_) || targets[peer].empty()) continue;
    const std::string reason = single_copy::probe(std::string(targets[peer].begin(), targets[peer].end()));
    if (!reason.empty()) why_not = fmt::format("cannot read {}: {}", describe_rank(static_cast<int32_t>(peer)), reason);
  }
  const std::string mine = fmt::format("{} {} {}", static_cast<int>(options_.single_copy),
                                       options_.single_copy_min_bytes, why_not);
  const auto all = bootstrap::exchange_by_plan_rank(*group_, std::vector<uint8_t>(mine.begin(), mine.end()),
                                                    plan_rank_of);
  std::map<size_t, std::vector<size_t>> by_min_bytes;
  std::string refusals;
  bool required = false;
  for (size_t r = 0; r < all.size(); ++r) {
    const std::string record(all[r].begin(), all[r].end());
    int mode = 0;
    size_t min_bytes = 0;
    int consumed = 0;
    if (std::sscanf(record.c_str(), "%d %zu %n", &mode, &min_bytes, &consumed) < 2)
      throw RuntimeError(fmt::format("flexplan: a malformed single-copy record from rank {}", r));
    by_min_bytes[min_bytes].push_back(r);
    required = required || mode == static_cast<int>(SingleCopy::On);
    if (record.size() > static_cast<size_t>(consumed))
      refusals += fmt::format("\n  rank {}: {}", r, record.substr(static_cast<size_t>(consumed)));
  }
  if (!refusals.empty()) {
    if (required)
      throw RuntimeError("flexplan: single copy between the processes of a host was asked for "
                         "(FLEXPLAN_SINGLE_COPY=on) but is not possible:" + refusals);
    return;  // chunks go through UCX's shared-memory FIFO
  }
  // The threshold decides how each chunk goes, at both ends: it must agree where single copy is on.
  if (by_min_bytes.size() > 1) {
    std::string message = "flexplan: the ranks use different single-copy thresholds (FLEXPLAN_SINGLE_COPY_MIN_BYTES):";
    for (const auto& [bytes, ranks] : by_min_bytes) message += fmt::format("\n  {} bytes: ranks {}", bytes, fmt::join(ranks, ", "));
    throw InputError(message);
  }
  std::vector<pid_t> pids(targets.size(), 0);
  for (size_t peer = 0; peer < targets.size(); ++peer)
    if (same_host_[peer] && peer != static_cast<size_t>(rank_))
      pids[peer] = single_copy::pid_of(std::string(targets[peer].begin(), targets[peer].end()));
  // A job without two processes on a host has nothing to send so.
  if (std::all_of(pids.begin(), pids.end(), [](pid_t pid) { return pid == 0; })) pids.clear();
  // The seam carries it from here (transport.hpp): both executors ask it.
  transport_->set_single_copy(std::move(pids), options_.single_copy_min_bytes);
}

Engine::~Engine() {
  if (options_.stats_report && watch_ && rank_ == 0 && std::uncaught_exceptions() == 0) {
    const std::string report = format_stats(watch_->stats());
    std::fprintf(stderr, "flexplan stats (plan rank 0; FLEXPLAN_STATS):\n%s", report.c_str());
  }
  shutdown();
}

void Engine::shutdown() {
  // Destroyed by an exception on its way out: the peers would wait for this rank in vain.
  if (broken_.empty() && std::uncaught_exceptions() > 0) {
    fail_all("the process left the communicator while an exception was propagating",
             /*tell_peers=*/true);
  }
  // Peers may still need this rank's part of outstanding operations: finish them.
  for (const auto& entry : std::vector<Outstanding>(outstanding_.begin(), outstanding_.end())) {
    try {
      wait(*entry.operation);
    } catch (const RuntimeError&) {
      // Already recorded in broken_; the destructor must not throw.
    }
  }
  bool clean = broken_.empty();
  if (clean) {
    // Everything this rank sent is delivered, then wait until every rank is that far before
    // cutting the endpoints. UCX keeps progressing meanwhile: a peer's last receives may need
    // this rank's worker.
    transport_->flush(options_.timeout);
    group_->barrier_start();
    const auto deadline = Clock::now() + options_.timeout;
    while (true) {
      const bool moved = transport_->progress();
      if (group_->barrier_done()) break;
      if (Clock::now() > deadline) {
        clean = false;
        break;
      }
      // A peer that aborted never reaches the barrier.
      if (transport_->abort_notice()) {
        clean = false;
        break;
      }
      if (!moved) std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
  transport_->close_endpoints(/*force=*/true, std::chrono::milliseconds(1000));
  spares_.clear();  // (a finished operation holds no UCX request, but none outlives the worker)
  transport_.reset();
  if (!clean) group_->abandon();
  group_.reset();
}

// --- starting operations ----------------------------------------------------------------------

const ir::Schedule* Engine::derived_schedule(ir::Collective collective, int32_t root) {
  if (!ir::has_root(collective) || ir::plans_collective(plan_, collective, root)) return nullptr;
  if (!ir::plans_collective_any_root(plan_, collective)) return nullptr;
  for (const ir::Schedule& s : derived_) {
    if (s.collective == collective && s.root == root) return &s;
  }
  // The chain visits the ranks in rank order from the root (the planner numbers learners
  // depth first, so each link carries the data once each way) and is pipelined by the runtime's
  // chunks; a reduce's chain ends at the root.
  const int32_t world = plan_.world_size;
  std::vector<int32_t> order;
  order.reserve(static_cast<size_t>(world));
  const bool broadcast = collective == ir::Collective::Broadcast;
  for (int32_t i = 0; i < world; ++i) order.push_back((root + (broadcast ? i : i + 1)) % world);
  ir::Schedule schedule;
  schedule.algorithm = "derived-chain";
  schedule.collective = collective;
  schedule.units = 1;
  schedule.root = root;
  ir::Op op;
  op.kind = broadcast ? ir::OpKind::Broadcast : ir::OpKind::Reduce;
  op.begin = 0;
  op.end = 1;
  op.root = root;
  op.group = ir::RankList(order);
  op.shape = ir::OpShape::Chain;
  ir::Step step;
  step.phase = broadcast ? ir::Phase::Broadcast : ir::Phase::Reduce;
  step.ops.push_back(std::move(op));
  schedule.steps = std::vector<ir::Step>{std::move(step)};
  try {
    ir::verify_schedule(schedule, world, fmt::format("the derived {} from root {}", ir::to_string(collective), root));
  } catch (const std::exception& e) {
    throw RuntimeError(std::string("flexplan: internal error: ") + e.what());
  }
  derived_.push_back(std::move(schedule));
  return &derived_.back();
}

const ir::Schedule& Engine::select(ir::Collective collective, uint64_t bytes, int32_t root, const CallInfo& call) {
  // A forced algorithm (force_algorithm) is an all-reduce's.
  const std::string_view forced =
      collective == ir::Collective::AllReduce ? std::string_view(forced_algorithm_) : std::string_view();
  const auto index = ir::find_schedule(plan_, {collective, bytes, root, forced});
  if (index) return plan_.schedules[*index];
  if (const ir::Schedule* derived = derived_schedule(collective, root)) return *derived;
  const std::string name(ir::to_string(collective));
  const std::string from_root = ir::has_root(collective) ? fmt::format(" from root {}", root) : "";
  std::string what = fmt::format("the plan has no {} schedule{} for {} bytes", name, from_root, bytes);
  if (to_string(call.collective) != name) what = fmt::format("{} (carrying out {})", what, to_string(call.collective));
  if (!ir::plans_collective(plan_, collective, root)) {
    what += fmt::format("; plan it with `flexplan TOPOLOGY --collectives {}{}`", name,
                        ir::has_root(collective) ? fmt::format(" --roots {}", root) : "");
  }
  throw InputError("flexplan: " + what);
}

void Engine::force_algorithm(const std::string& algorithm) {
  const std::vector<std::string> present = ir::algorithms_of(plan_, ir::Collective::AllReduce);
  if (!algorithm.empty() && std::find(present.begin(), present.end(), algorithm) == present.end())
    throw RuntimeError(fmt::format("the plan has no allreduce schedule of algorithm '{}' (it has: {})",
                                   algorithm, fmt::join(present, ", ")));
  forced_algorithm_ = algorithm;
}

const codegen::RankProgram& Engine::program_for(const ir::Schedule& schedule) {
  auto it = programs_.find(&schedule);
  if (it == programs_.end()) {
    it = programs_.emplace(&schedule, codegen::lower_rank_program(schedule, rank_)).first;
    codegen::link_tasks(it->second);  // (for overlapping steps; once per schedule, beside the lowering)
  }
  return it->second;
}

namespace {
// Rank r's first element in the concatenation of per-rank blocks.
uint64_t block_begin(std::span<const uint64_t> counts, int32_t rank) {
  uint64_t begin = 0;
  for (int32_t r = 0; r < rank; ++r) begin += counts[static_cast<size_t>(r)];
  return begin;
}
}  // namespace

std::shared_ptr<Operation> Engine::start(const CollectiveCall& in) {
  if (!broken_.empty()) {
    throw RuntimeError("flexplan: the communicator is unusable after an earlier error: " + broken_);
  }
  const int32_t world = plan_.world_size;
  CallInfo call;
  if (in.call) {
    call = *in.call;
  } else {
    call.collective = static_cast<UserCollective>(static_cast<uint8_t>(in.collective));
    call.root = ir::has_root(in.collective) ? in.root : -1;
  }
  const std::string name(to_string(call.collective));
  const size_t element_size = size_of(in.type);
  if (element_size == 0) throw InputError(fmt::format("flexplan {}: unknown data type", name));
  if (call.root < -1 || call.root >= world || (ir::has_root(in.collective) && (in.root < 0 || in.root >= world))) {
    throw InputError(fmt::format("flexplan {}: root {} is not a rank of the {} ranks", name,
                                 ir::has_root(in.collective) ? in.root : call.root, world));
  }
  // The elements the schedule spans, and each rank's where the collective is sharded.
  uint64_t total = in.count;
  if (ir::has_shards(in.collective)) {
    if (!in.counts.empty() && in.counts.size() != static_cast<size_t>(world)) {
      throw InputError(fmt::format("flexplan {}: {} per-rank counts for {} ranks", name, in.counts.size(), world));
    }
    shard_counts_.assign(static_cast<size_t>(world), in.count);
    if (!in.counts.empty()) shard_counts_.assign(in.counts.begin(), in.counts.end());
    total = 0;
    for (const uint64_t c : shard_counts_) {
      if (__builtin_add_overflow(total, c, &total)) {
        throw InputError(fmt::format("flexplan {}: the per-rank counts overflow", name));
      }
    }
    if (!in.counts.empty()) {
      call.layout = layout_digest(shard_counts_.data(), shard_counts_.size());
      call.count = total;
    } else if (!call.count) {
      call.count = in.count;
    }
  }
  if (total > std::numeric_limits<uint64_t>::max() / element_size) {
    throw InputError(fmt::format("flexplan {}: count {} overflows the byte size", name, total));
  }
  const uint64_t bytes = total * element_size;
  const int32_t root = ir::has_root(in.collective) ? in.root : 0;
  const ir::Schedule* selected = &select(in.collective, bytes, root, call);
  if (watch_) {
    const size_t index = plan_index(*selected);
    if (index != SIZE_MAX && watch_->note_start(index) && check_drift(index))
      selected = &select(in.collective, bytes, root, call);  // the new plan's
  }
  const ir::Schedule& schedule = *selected;

  // The operation's buffers (operation.hpp, OperationArgs): the result forms in place in the
  // receive buffer where the collective allows, else in working memory.
  OperationArgs args{in.send, in.recv, total, in.type, in.op, call};
  if (!ir::combines(in.collective)) args.op = ReduceOp::Sum;  // (an op it never applies)
  const auto need = [&](const void* buffer, uint64_t elements, const char* which) {
    if (elements > 0 && buffer == nullptr) {
      throw InputError(fmt::format("flexplan {}: null {} buffer for {} elements", name, which, elements));
    }
  };
  switch (in.collective) {
    case ir::Collective::AllReduce:
      if (args.send == nullptr) args.send = args.recv;
      need(args.recv, total, "receive");
      break;
    case ir::Collective::Broadcast:
      need(in.recv, total, "receive");
      // Off the root the input is never read; at the root it may come from elsewhere.
      args.send = (rank_ == in.root && in.send != nullptr) ? in.send : in.recv;
      break;
    case ir::Collective::Reduce:
      if (args.send == nullptr) args.send = in.recv;  // in place
      need(args.send, total, "send");
      if (rank_ == in.root) {
        need(in.recv, total, "receive");
      } else {  // partial sums only: working memory, nothing returned
        args.recv = nullptr;
        args.result_begin = args.result_end = 0;
      }
      break;
    case ir::Collective::AllGather:
    case ir::Collective::ReduceScatter: {
      if (const std::string why = shard_check_.set_sharded(schedule, world, shard_counts_); !why.empty()) {
        throw InputError(fmt::format("flexplan {}: {}", name, why));
      }
      const uint64_t mine = shard_counts_[static_cast<size_t>(rank_)];
      const uint64_t begin = block_begin(shard_counts_, rank_);
      if (in.collective == ir::Collective::AllGather) {
        need(in.recv, total, "receive");
        // This rank's contribution goes to its block, then the schedule runs in place there
        // (NCCL's in place: the send buffer is that block already; null send: MPI's in place).
        std::byte* block = static_cast<std::byte*>(in.recv) + begin * element_size;
        if (in.send != nullptr && in.send != block && mine > 0) std::memmove(block, in.send, mine * element_size);
        args.send = args.recv = in.recv;
      } else {
        need(in.send, total, "send");
        need(in.recv, mine, "receive");
        // Every rank's partial sums need the whole buffer's room: working memory, of which
        // this rank's block is delivered (also NCCL's in place, recv inside send).
        args.recv = nullptr;
        args.deliver = in.recv;
        args.result_begin = begin;
        args.result_end = begin + mine;
      }
      args.shard_counts = shard_counts_;
      break;
    }
  }
  return launch(schedule, args);
}

std::shared_ptr<Operation> Engine::launch(const ir::Schedule& schedule, const OperationArgs& args) {
  // The newest operation stays less than kMaxAhead sequence numbers ahead of the oldest
  // unfinished one, so that no two operations in flight share a tag (tag.hpp): finish the
  // oldest first where needed.
  while (!outstanding_.empty() &&
         next_sequence_ - outstanding_.front().operation->sequence() >= tag::kMaxAhead) {
    const auto oldest = outstanding_.front().operation;
    drive(*oldest);
  }
  if (!broken_.empty()) {
    throw RuntimeError("flexplan: the communicator is unusable after an earlier error: " + broken_);
  }
  // A recent operation's storage is reused once nothing else holds it (its Request is gone):
  // a loop of blocking all-reduces, or of a few nonblocking ones in flight at once, then
  // allocates nothing per call.
  std::shared_ptr<Operation> operation;
  const codegen::RankProgram& program = program_for(schedule);
  try {
    const auto free = std::find_if(spares_.begin(), spares_.end(), [](const auto& spare) {
      return spare.use_count() == 1 && spare->reusable();
    });
    if (free != spares_.end()) {
      operation = *free;
      operation->restart(next_sequence_++, schedule, program, args);
    } else {
      ExecContext context{transport_.get(),    &pool_,          &plan_,
                          rank_,                options_.chunk_bytes, options_.window,
                          &same_host_,          &quarantine_,    &pool_.arithmetic(),
                          check_calls_,         sink_.get(),     sink_bytes_,
                          timing_,              timing_ && options_.replan != Replan::Off};
      context.fused_part_bytes = pool_.arithmetic().folds_in_parts() ? options_.fused_read_bytes : 0;
      // Drift checks compare each step's time with its price: steps run one after another then.
      context.steps_in_flight = options_.step_overlap && options_.replan == Replan::Off ? options_.step_window : 1;
      operation = std::make_shared<Operation>(context, next_sequence_++, schedule, program, args);
      // Kept for reuse; beyond kMaxSpares the oldest is let go.
      if (spares_.size() == kMaxSpares) spares_.erase(spares_.begin());
      spares_.push_back(operation);
    }
  } catch (const std::exception& e) {
    // (Out of memory while posting its first transfers.) This rank has used a sequence number
    // its peers will wait on: the communicator cannot go on.
    broken_ = fmt::format("starting {} #{} failed: {}", to_string(args.call.collective), next_sequence_ - 1, e.what());
    tell_peers(broken_);
    throw RuntimeError("flexplan: " + broken_);
  }
  if (!operation->done()) {
    outstanding_.push_back({operation, Clock::now()});
    progress();  // post the first transfers now, so peers can start
  } else if (timing_) {
    note_finished(*operation, Clock::now());
  }
  return operation;
}

// --- progress --------------------------------------------------------------------------------

bool Engine::progress() {
  bool moved = transport_->progress();
  if (!abort_seen_) {
    if (const auto notice = transport_->abort_notice()) {
      abort_seen_ = true;
      // The peer told everyone: no need to pass it on.
      fail_all(fmt::format("{} failed: {}", describe_rank(notice->rank), notice->reason),
               /*tell_peers=*/false);
    }
  }
  if (const auto& failure = transport_->failure(); failure && !peer_failure_seen_) {
    peer_failure_seen_ = true;
    fail_all(fmt::format("{} reports peer {} failed: {}", transport_->name(), describe_rank(failure->rank),
                         failure->status.text),
             /*tell_peers=*/true);
  }

  bool any_open = false;
  for (auto& entry : outstanding_) {
    Operation& operation = *entry.operation;
    entry.moved_this_pass = operation.advance();
    moved = moved || entry.moved_this_pass;
    // A failure breaks the communicator at once: the later operations fail before they move.
    if (operation.failed() && broken_.empty()) break_on(operation);
    any_open = any_open || (!operation.done() && !operation.failed());
  }
  // The clock only while an operation stays open (a read costs about as much as an idle pass
  // through UCX): the pass that completes a blocking all-reduce reads none.
  if (any_open) {
    const auto now = Clock::now();
    // Time spent outside the runtime (the caller computing) is not the operations' fault. Idle
    // waits inside wait() are the runtime's own time: they mark last_in_runtime_ too.
    if (now - last_in_runtime_ > options_.timeout / 2) {
      for (auto& entry : outstanding_) entry.last_moved = now;
    }
    last_in_runtime_ = now;
    for (auto& entry : outstanding_) {
      Operation& operation = *entry.operation;
      if (entry.moved_this_pass) {
        entry.last_moved = now;
      } else if (!operation.done() && !operation.failed() && now - entry.last_moved > options_.timeout) {
        operation.fail(fmt::format("no progress for {} ms (FLEXPLAN_TIMEOUT_MS): the peer is dead, "
                                   "stuck outside the runtime, or issuing different operations",
                                   options_.timeout.count()));
      }
    }
  }
  for (auto& entry : outstanding_) {
    if (entry.operation->failed() && broken_.empty()) break_on(*entry.operation);  // (timed out)
  }
  if (timing_) {
    std::optional<Clock::time_point> now;  // one clock read for all that finished in this pass
    for (const auto& entry : outstanding_) {
      if (!entry.operation->done() || entry.operation->failed()) continue;
      if (!now) now = Clock::now();
      note_finished(*entry.operation, *now);
    }
  }
  std::erase_if(outstanding_, [](const Outstanding& entry) {
    return entry.operation->done() || entry.operation->failed();
  });
  return moved;
}

void Engine::break_on(const Operation& failed) {
  broken_ = failed.error();
  tell_peers(broken_);
  fail_all("abandoned after an earlier error: " + broken_, /*tell_peers=*/false);
}

void Engine::fail_all(const std::string& why, bool tell_peers) {
  for (auto& entry : outstanding_) entry.operation->fail(why);
  if (!broken_.empty()) return;
  broken_ = outstanding_.empty() ? why : outstanding_.front().operation->error();
  if (tell_peers) this->tell_peers(broken_);
}

void Engine::tell_peers(const std::string& cause) {
  // Best effort and bounded: a dead peer's notice may never leave.
  transport_->send_abort(rank_, cause, kAbortSendLimit);
}

void Engine::abort(const std::string& reason) {
  fail_all("aborted by the application: " + reason, /*tell_peers=*/true);
}

std::string Engine::describe_rank(int32_t rank) const {
  const auto& names = plan_.rank_names;
  if (rank >= 0 && static_cast<size_t>(rank) < names.size()) {
    return fmt::format("rank {} ({})", rank, names[static_cast<size_t>(rank)]);
  }
  return fmt::format("rank {}", rank);
}

void Engine::throw_if_failed(const Operation& operation) const {
  if (operation.failed()) throw RuntimeError("flexplan: " + operation.error());
}

void Engine::sparse_allreduce(const SparseArgs& args) {
  if (!broken_.empty()) {
    throw RuntimeError("flexplan: the communicator is unusable after an earlier error: " + broken_);
  }
  // The exchange runs outside the queue: finish what is queued, so that its sequence number
  // is the only one in flight (tag.hpp).
  while (!outstanding_.empty()) {
    const auto oldest = outstanding_.front().operation;
    drive(*oldest);
    throw_if_failed(*oldest);
  }
  if (!sparse_exchange_) {
    ir::SparseLayout layout;
    try {
      layout = ir::sparse_layout(plan_);
    } catch (const std::invalid_argument& e) {
      throw InputError(std::string("flexplan sparse_allreduce: ") + e.what());
    }
    // Built from the layout alike on every rank, and proved an all-reduce before any use.
    ir::SparseExchange exchange = ir::sparse_exchange(layout);
    try {
      ir::verify_schedule(exchange.schedule, plan_.world_size, "the sparse exchange");
    } catch (const std::exception& e) {
      throw RuntimeError(std::string("flexplan sparse_allreduce: internal error: ") + e.what());
    }
    sparse_layout_ = std::move(layout);
    sparse_exchange_ = std::move(exchange);
  }
  const uint64_t sequence = next_sequence_++;
  CallInfo call;
  call.collective = args.machine_steps_only ? UserCollective::SparseMachineSteps : UserCollective::SparseAllReduce;
  const SparseContext context{
      transport_.get(), rank_, &*sparse_layout_, &*sparse_exchange_, sequence, &sparse_scratch_,
      [this](const std::function<size_t()>& remaining, const std::string& what) {
        drive_until(remaining, what);
      },
      [this](int32_t rank) { return describe_rank(rank); }, check_calls_,
      make_signature(call, args.count, args.type, ReduceOp::Sum, sequence),
      sink_.get(), sink_bytes_};
  sparse_scratch_.start_call();
  try {
    run_sparse_allreduce(context, args);
  } catch (const InputError&) {
    throw;  // the same on every rank, before any message: the communicator stays usable
  } catch (const RuntimeError& e) {
    if (broken_.empty()) {
      broken_ = e.what();
      tell_peers(broken_);
    }
    throw;
  }
}

void Engine::drive_until(const std::function<size_t()>& remaining, const std::string& what) {
  auto idle_since = Clock::now();
  auto last_moved = idle_since;
  size_t left = remaining();
  while (left > 0) {
    const bool moved = progress();
    if (!broken_.empty()) {
      throw RuntimeError(fmt::format("flexplan sparse_allreduce: {}: {}", what, broken_));
    }
    const size_t now_left = remaining();
    const auto now = Clock::now();
    if (moved || now_left < left) {
      idle_since = now;
      if (now_left < left) last_moved = now;
      left = now_left;
      continue;
    }
    if (now - last_moved > options_.timeout) {
      throw RuntimeError(fmt::format(
          "flexplan sparse_allreduce: {}: no progress for {} ms (FLEXPLAN_TIMEOUT_MS) with {} "
          "transfers outstanding: a peer is dead, stuck, or issuing different operations",
          what, options_.timeout.count(), left));
    }
    if (!transport_->blocking()) continue;
    if (now - idle_since < spin_before_yield_) continue;
    if (now - idle_since < options_.yield_before_sleep) {
      sched_yield();
    } else {
      transport_->wait_for_event(kSendPendingSleep);
    }
    last_in_runtime_ = Clock::now();
  }
}

void Engine::wait(Operation& operation) {
  drive(operation);
  throw_if_failed(operation);
}

void Engine::drive(Operation& operation) {
  // Blocking mode first polls for spin_before_yield_ (a peer on another core answers a small
  // message sooner than a yield returns), then yields the core for a short while (a peer
  // sharing it is likely the one this rank waits for, and a yield costs far less than a sleep
  // and a wake-up), then
  // sleeps on the worker's event fd. It keeps yielding while a send to a peer on this host is
  // in flight: that send waits for the peer to drain UCX's shared-memory FIFO (512 KiB), which
  // takes the peer's running, perhaps on this very core, and no event says when it drained.
  std::optional<Clock::time_point> idle_since;  // since the last pass that moved; read when idle
  while (!operation.done() && !operation.failed()) {
    if (progress() || operation.done() || operation.failed()) {
      idle_since.reset();
      continue;
    }
    if (!transport_->blocking()) continue;
    const auto now = Clock::now();
    if (!idle_since) idle_since = now;
    if (now - *idle_since < spin_before_yield_) continue;
    if (now - *idle_since < options_.yield_before_sleep || any_send_on_host_pending()) {
      sched_yield();
    } else {
      const auto cap = any_send_pending() ? kSendPendingSleep : kMaxSleep;
      transport_->wait_for_event(std::min(cap, until_next_deadline()));
    }
    last_in_runtime_ = Clock::now();
  }
}

std::chrono::milliseconds Engine::until_next_deadline() const {
  auto earliest = Clock::time_point::max();
  for (const auto& entry : outstanding_) {
    earliest = std::min(earliest, entry.last_moved + options_.timeout);
  }
  if (earliest == Clock::time_point::max()) return options_.timeout;
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(earliest - Clock::now());
  return std::max(left, std::chrono::milliseconds(1));
}

bool Engine::any_send_pending() const {
  return std::any_of(outstanding_.begin(), outstanding_.end(),
                     [](const Outstanding& entry) { return entry.operation->sending(); });
}

bool Engine::any_send_on_host_pending() const {
  return std::any_of(outstanding_.begin(), outstanding_.end(),
                     [](const Outstanding& entry) { return entry.operation->sending_on_host(); });
}

bool Engine::test(Operation& operation) {
  if (!operation.done() && !operation.failed()) progress();
  throw_if_failed(operation);
  return operation.done();
}

}  // namespace flexplan

namespace flexplan {

// --- following the network -------------------------------------------------------------------

size_t Engine::plan_index(const ir::Schedule& schedule) const {
  const ir::Schedule* first = plan_.schedules.data();
  if (&schedule < first || &schedule >= first + plan_.schedules.size()) return SIZE_MAX;
  return static_cast<size_t>(&schedule - first);
}

void Engine::note_finished(const Operation& operation, Clock::time_point now) {
  const size_t index = plan_index(operation.schedule());
  if (index == SIZE_MAX) return;
  // The caller's time before this call: from the end of the last call that left nothing
  // outstanding to this one's start (0 for calls that overlap others).
  double outside = 0;
  if (idle_since_ && operation.started() > *idle_since_)
    outside = std::chrono::duration<double>(operation.started() - *idle_since_).count();
  idle_since_.reset();
  watch_->record(index, operation.bytes(), std::chrono::duration<double>(now - operation.started()).count(),
                 operation.step_seconds(), outside, &operation.peer_waits());
  if (outstanding_.size() <= 1) idle_since_ = now;
}

void Engine::setup_watch() {
  std::string error;
  std::unique_ptr<Topology> topology;
  if (!options_.topology_path.empty()) {
    try {
      topology = std::make_unique<Topology>(load_topology(options_.topology_path));
      if (topology->hash_hex() != plan_.topology_hash) {
        error = fmt::format("FLEXPLAN_TOPOLOGY '{}' has hash {}, the plan was made for {}", options_.topology_path,
                            topology->hash_hex(), plan_.topology_hash);
      } else if (topology->num_learners() != plan_.world_size) {
        error = fmt::format("FLEXPLAN_TOPOLOGY '{}' has {} learners, the plan {}", options_.topology_path,
                            topology->num_learners(), plan_.world_size);
      }
    } catch (const std::exception& e) {
      error = fmt::format("FLEXPLAN_TOPOLOGY '{}': {}", options_.topology_path, e.what());
    }
  }
  bootstrap::raise_if_any_failed(*group_, error, "loading the topology", /*bad_input=*/true);
  // Drift checks are exchanges every window of calls: every rank must make them alike.
  const std::string mine = fmt::format(
      "FLEXPLAN_REPLAN={} FLEXPLAN_DRIFT_WINDOW={} FLEXPLAN_DRIFT_PERCENT={} FLEXPLAN_REPLAN_CONFIRM={} "
      "FLEXPLAN_REPLAN_MIN_GAIN={} topology={}",
      options_.replan == Replan::Off ? "off" : options_.replan == Replan::Detect ? "detect" : "auto",
      options_.drift_window, options_.drift_percent, options_.replan_confirm, options_.replan_min_gain,
      topology ? "yes" : "no");
  const auto all = group_->allgather(mine);
  std::map<std::string, std::vector<size_t>> by_setting;
  for (size_t r = 0; r < all.size(); ++r) by_setting[all[r]].push_back(r);
  if (by_setting.size() > 1) {
    std::string message = "flexplan: the ranks follow the network differently, which must be the same on every rank:";
    for (const auto& [setting, ranks] : by_setting)
      message += fmt::format("\n  {}: {} {}", setting, group_->member_noun(), fmt::join(ranks, ", "));
    throw InputError(message);
  }
  if (options_.replan == Replan::Auto && !topology && rank_ == 0) {
    std::fprintf(stderr, "flexplan: warning: FLEXPLAN_REPLAN=auto without FLEXPLAN_TOPOLOGY: drift is reported, "
                         "never re-planned\n");
  }
  watch_ = std::make_unique<NetworkWatch>(options_, plan_, rank_, std::move(topology));
  timing_ = options_.stats_report || options_.replan != Replan::Off;
}

void Engine::drain() {
  while (!outstanding_.empty()) {
    const auto oldest = outstanding_.front().operation;
    drive(*oldest);
    throw_if_failed(*oldest);
  }
}

bool Engine::check_drift(size_t schedule) {
  drain();
  const auto program_of = [this](size_t s) -> const codegen::RankProgram& { return program_for(plan_.schedules[s]); };
  const auto mine = watch_->window_for_check(schedule, program_of);
  if (!mine) return false;  // the baseline, alike on every rank
  const auto records = group_->allgather(encode_window(*mine));
  std::vector<RankWindow> windows(static_cast<size_t>(plan_.world_size));
  for (size_t m = 0; m < records.size(); ++m) {
    try {
      windows[static_cast<size_t>(plan_rank_of_[m])] = decode_window(records[m]);
    } catch (const std::exception&) {
      // (A malformed record counts as no figures; every rank sees the same.)
    }
  }
  const double threshold = options_.drift_percent / 100.0;
  const DriftVerdict verdict = judge_drift(windows, threshold);
  // Checks in a row that drifted the same way (every rank counts alike: the verdict is common).
  const unsigned streak = watch_->note_verdict(schedule, verdict.drifted, verdict.slower);
  if (!verdict.drifted && verdict.slow_process < 0) return false;
  const auto links = watch_->link_estimates(windows, threshold);
  if (!watch_->drift_reported(schedule)) {
    watch_->set_drift_reported(schedule);
    const std::string event = fmt::format("flexplan: drift before call #{}: {}", next_sequence_,
                                          watch_->describe_drift(schedule, verdict, links));
    watch_->add_event(event);
    if (rank_ == 0) std::fprintf(stderr, "%s\n", event.c_str());
  }
  if (!verdict.drifted || options_.replan != Replan::Auto || !watch_->can_replan() || links.empty()) return false;
  if (streak < options_.replan_confirm) return false;  // (hysteresis: one window is not enough)
  return replan_for(links, "drift").switched;
}

ReplanResult Engine::replan() {
  if (!broken_.empty()) {
    throw RuntimeError("flexplan: the communicator is unusable after an earlier error: " + broken_);
  }
  drain();
  const auto program_of = [this](size_t s) -> const codegen::RankProgram& { return program_for(plan_.schedules[s]); };
  const auto mine = watch_->window_for_check(std::nullopt, program_of);
  const auto records = group_->allgather(mine ? encode_window(*mine) : std::string());
  std::vector<RankWindow> windows(static_cast<size_t>(plan_.world_size));
  for (size_t m = 0; m < records.size(); ++m) {
    try {
      if (!records[m].empty()) windows[static_cast<size_t>(plan_rank_of_[m])] = decode_window(records[m]);
    } catch (const std::exception&) {
    }
  }
  // Figures that do not drift by the runtime's own test are noise: the plan is then made for the
  // current figures (a busy host's loopback blamed a link 10x in the PyTorch test without this).
  const double threshold = options_.drift_percent / 100.0;
  const bool drifted = judge_drift(windows, threshold).drifted;
  return replan_for(drifted ? watch_->link_estimates(windows, threshold)
                            : std::map<int32_t, double>{},
                    "requested");
}

ReplanResult Engine::replan_for(const std::map<int32_t, double>& links, const std::string& cause) {
  ReplanResult result;
  result.call = next_sequence_;
  std::string error;
  ir::Plan fresh;
  uint64_t fingerprint = 0;
  double seconds = 0;
  std::string small_gain;  // why a sound new plan is not switched to
  bool restored = false;   // the plan that ran at the file's rates came back (nothing planned)
  if (!watch_->can_replan()) {
    error = "no topology to re-plan from (FLEXPLAN_TOPOLOGY)";
  } else if (generated_) {
    error = "the ranks run generated programs of the loaded plan (FLEXPLAN_PROGRAM_LIBRARY)";
  } else {
    try {
      watch_->set_candidate_links(links);
      if (file_plan_index_ && watch_->candidate_is_file() && !watch_->current_is_file()) {
        // Every link back at the file's rate: the plan that ran at those rates comes back, not
        // the in-process planner's for the same figures, which may differ (the options, forced
        // algorithms or cost model the job's plan was made with are not known here).
        fresh = retired_plans_[*file_plan_index_];
        restored = true;
      } else {
        fresh = watch_->plan_for_candidate(plan_, &seconds);
      }
      fingerprint = ir::plan_fingerprint(fresh);
      // (A plan for the topology file's own figures, every link back, is switched to whatever
      // it saves: it is the plan the job was made with, and restoring a link brings it back.)
      if (cause == "drift" && fingerprint != fingerprint_ && !watch_->candidate_is_file()) {
        // Hysteresis: a plan that would save little is not worth a switch (and a switch back).
        const double gain = watch_->predicted_gain(plan_, fresh);
        if (gain < options_.replan_min_gain / 100.0) {
          small_gain = fmt::format("the new plan would save {:.1f}% of the calls' predicted time at the measured "
                                   "links, under FLEXPLAN_REPLAN_MIN_GAIN={}%", 100 * gain, options_.replan_min_gain);
        }
      }
      if (!forced_algorithm_.empty()) {
        const auto present = ir::algorithms_of(fresh, ir::Collective::AllReduce);
        if (std::find(present.begin(), present.end(), forced_algorithm_) == present.end())
          error = fmt::format("the new plan lacks the forced algorithm '{}'", forced_algorithm_);
      }
    } catch (const std::exception& e) {
      error = e.what();
    }
  }
  // Every rank's outcome: the same plan hash everywhere, or the old plan stays on every rank.
  const auto all = group_->allgather(error.empty() ? fmt::format("{:016x}", fingerprint) : "!" + error);
  std::string refusal;
  for (size_t m = 0; m < all.size() && refusal.empty(); ++m) {
    if (!all[m].empty() && all[m][0] == '!') refusal = fmt::format("rank {}: {}", plan_rank_of_[m], all[m].substr(1));
  }
  if (refusal.empty()) {
    for (size_t m = 1; m < all.size(); ++m) {
      if (all[m] != all[0]) {
        refusal = fmt::format("the ranks made different plans (hash {} at rank {}, {} at rank {})", all[0],
                              plan_rank_of_[0], all[m], plan_rank_of_[m]);
        break;
      }
    }
  }
  std::string links_text;
  for (const auto& [node, factor] : links) links_text += fmt::format(" node {} x{:.2f}", node, factor);
  if (!refusal.empty()) {
    result.message = fmt::format("flexplan: re-plan ({}) before call #{} refused, the old plan stays: {}", cause,
                                 result.call, refusal);
  } else if (fingerprint == fingerprint_) {
    result.message = fmt::format("flexplan: re-plan ({}) before call #{}: the plan for the measured links is the "
                                 "current plan", cause, result.call);
  } else if (!small_gain.empty()) {
    // (Every rank computed the same gain from the same plans and figures.)
    result.message = fmt::format("flexplan: re-plan ({}) before call #{}: the old plan stays: {}", cause,
                                 result.call, small_gain);
  } else {
    // Every rank is between calls with nothing outstanding (drained): switch here.
    const bool leaving_file_rates = watch_->current_is_file() && !watch_->candidate_is_file();
    watch_->adopt(fresh);
    retired_plans_.push_back(std::move(plan_));
    if (leaving_file_rates) file_plan_index_ = retired_plans_.size() - 1;
    retired_programs_.push_back(std::move(programs_));
    programs_.clear();
    spares_.clear();
    plan_ = std::move(fresh);
    fingerprint_ = fingerprint;
    result.switched = true;
    std::string ranges;
    for (const ir::Schedule& s : plan_.schedules) {
      ranges += fmt::format(" {} {} [{}, {})", ir::to_string(s.collective), s.algorithm, s.min_bytes,
                            s.max_bytes ? std::to_string(*s.max_bytes) : "inf");
    }
    result.message = fmt::format("flexplan: re-planned ({}) from call #{}: plan {} hash {:016x} for links{}; "
                                 "schedules:{} ({})", cause, result.call,
                                 watch_->generation(), fingerprint, links_text.empty() ? " as measured" : links_text,
                                 ranges, restored ? "restored: the plan that ran at the file's rates"
                                                  : fmt::format("planned in {:.1f} ms on this rank", 1e3 * seconds));
    if (!options_.replan_out.empty() && rank_ == 0) {
      try {
        ir::write_plan_file(options_.replan_out, plan_);
        result.message += fmt::format("; written to {}", options_.replan_out);
      } catch (const std::exception& e) {
        result.message += fmt::format("; writing {} failed: {}", options_.replan_out, e.what());
      }
    }
  }
  // A re-plan that keeps the old plan for the same kind of reason as the one before (its words,
  // whatever the numbers) is said once: a lasting slowdown with no better plan would repeat it
  // every window.
  std::string reason;  // the message without its numbers (the call, the gain, the factors)
  if (!result.switched) {
    for (const char c : result.message)
      if ((c < '0' || c > '9') && c != '.') reason += c;
  }
  const bool repeated = !result.switched && reason == last_kept_reason_;
  last_kept_reason_ = reason;
  if (repeated) return result;
  watch_->add_event(result.message);
  if (rank_ == 0) std::fprintf(stderr, "%s\n", result.message.c_str());
  return result;
}

CommStats Engine::stats() const { return watch_->stats(); }

}  // namespace flexplan
