// The probe's run over any out-of-band group (MPI under mpirun, torch's store under torchrun):
// measures a cluster with the runtime's own transport, one process per learner, and writes its
// topology JSON (docs/probe.md). Rank 0 plans every test and broadcasts it; every rank runs its
// part with time limits on every wait; rank 0 gathers the figures, infers the switch tree where
// none is given, and writes the topology.
#include "probe/run_probe.hpp"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>
#include <type_traits>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "planner/algorithms.hpp"
#include "planner/cost_model.hpp"
#include "planner/plan_builder.hpp"
#include "probe/model.hpp"
#include "runtime/communicator.hpp"
#include "runtime/errors.hpp"
#include "runtime/options.hpp"
#include "runtime/tag.hpp"
#include "runtime/transport.hpp"
#include "topology/topology.hpp"

namespace flexplan::probe {
namespace {

using Clock = std::chrono::steady_clock;
// As flexplan's (README, exit codes): 4 is a run that could not finish.
constexpr int kExitOk = 0, kExitOff = 1, kExitBadInput = 2, kExitFailed = 4;
// How long a ping may wait for its answer before the probe gives up on the peer.
constexpr double kTestGrace = 20.0;
// A bandwidth test still unfinished this long past its planned end is late: abandoned and run
// again (once; late twice is a failure). Its network has long drained by then (a TCP window
// in flight takes well under a second at the slowest link measured); what is left is a
// scheduler or a retransmission timer, which a second try does not meet again.
constexpr double kLateAfter = 5.0;
// Seconds kept back from the budget for the end: closing the transport, writing the files and
// the launcher's own end.
constexpr double kEndReserve = 5.0;
// Seconds the hop-overhead test is given: a communicator's start and about a second of
// all-reduces.
constexpr double kHopTestReserve = 3.0;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// A process's parent, name and start time (clock ticks after boot) from /proc/PID/stat; false
// where it cannot be read.
bool read_stat(const std::string& pid, int* parent, std::string* name, double* start_ticks) {
  std::ifstream f("/proc/" + pid + "/stat");
  std::string text;
  std::getline(f, text);
  const size_t open = text.find('('), close = text.rfind(')');
  if (open == std::string::npos || close == std::string::npos || close < open) return false;
  *name = text.substr(open + 1, close - open - 1);
  std::istringstream rest(text.substr(close + 1));
  std::string field;
  try {
    for (int i = 3; i <= 22 && rest >> field; ++i) {
      if (i == 4) *parent = std::stoi(field);
      if (i == 22) *start_ticks = std::stod(field);
    }
  } catch (const std::exception&) {
    return false;
  }
  return true;
}

// When the run started as its user sees it, on the steady clock: the launcher's start where it
// is this process's ancestor on this host (mpirun started rank 0 here: its start-up before the
// processes counts too), else this process's start (its MPI or Python start-up counts). Now,
// where neither can be read.
Clock::time_point run_start() {
  static const std::set<std::string> launchers{"mpirun", "mpiexec", "orterun", "prterun", "prun", "torchrun", "srun"};
  int parent = 0;
  std::string name;
  double ticks_at_start = -1, own = -1;
  if (!read_stat("self", &parent, &name, &own)) return Clock::now();
  ticks_at_start = own;
  for (int hops = 0; parent > 1 && hops < 32; ++hops) {
    int next = 0;
    double started = -1;
    if (!read_stat(std::to_string(parent), &next, &name, &started)) break;
    if (launchers.count(name)) {
      ticks_at_start = started;
      break;
    }
    parent = next;
  }
  timespec boot{};
  const long ticks = sysconf(_SC_CLK_TCK);
  if (ticks <= 0 || clock_gettime(CLOCK_BOOTTIME, &boot) != 0) return Clock::now();
  const double age = static_cast<double>(boot.tv_sec) + 1e-9 * static_cast<double>(boot.tv_nsec) -
                     ticks_at_start / static_cast<double>(ticks);
  if (!(age >= 0 && age < 600)) return Clock::now();
  return Clock::now() - std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(age));
}

// The probe's group lent to a communicator of the runtime (which owns the groups it is given).
class BorrowedGroup final : public bootstrap::Group {
 public:
  explicit BorrowedGroup(bootstrap::Group& group) : group_(group) {}
  int rank() const override { return group_.rank(); }
  int size() const override { return group_.size(); }
  std::vector<std::string> allgather(const std::string& mine) override { return group_.allgather(mine); }
  bootstrap::HostIdentity host_identity() override { return group_.host_identity(); }
  void barrier_start() override { group_.barrier_start(); }
  bool barrier_done() override { return group_.barrier_done(); }
  std::string member_noun() const override { return group_.member_noun(); }
  std::string launch_hint(int n) const override { return group_.launch_hint(n); }

 private:
  bootstrap::Group& group_;
};

struct Settings {
  std::string output, report, topology, slurm, compare, machine_of_rank, name = "probed";
  std::string budget = "60s", tolerance = "3%", compare_tolerance = "10%", message = "64K";
  bool blocking = false, no_infer = false;
  double budget_s = 60, tol = 0.03, cmp_tol = 0.10;
  size_t message_bytes = 64 * 1024;
  unsigned window = 4;
};

// A transfer's completion, told from inside progress().
struct Slot : Transport::Completion {
  Transport::Request request = nullptr;
  bool busy = false, done = false;
  Transport::Status status;
  size_t length = 0;
  std::vector<char> buffer;
  Slot() { notify = &Slot::told; }
  static void told(Transport::Completion* c, Transport::Status s, size_t length, uint64_t) {
    auto* slot = static_cast<Slot*>(c);
    slot->done = true;
    slot->status = s;
    slot->length = length;
  }
};

class Prober {
 public:
  Prober(const Settings& s, bootstrap::Group& group) : s_(s), group_(group), rank_(group.rank()), world_(group.size()) {}
  int rank() const { return rank_; }
  int world() const { return world_; }

  // Who is on which machine: --machine-of-rank, else the host name. Collective.
  void find_machines(const std::vector<std::string>& override_names) {
    names_overridden_ = !override_names.empty();
    real_hosts_ = allgather(bootstrap::this_host());
    grouping_ = group_by_name(override_names.empty() ? real_hosts_ : override_names);
  }
  const MachineGrouping& grouping() const { return grouping_; }

  // The runtime's transport, chosen as the runtime chooses it. Collective.
  void connect() {
    const Options options = Options::from_env();
    const bool one_host = std::all_of(real_hosts_.begin(), real_hosts_.end(), [&](const auto& h) { return h == real_hosts_[0]; });
    const char* tls = one_host && std::getenv("UCX_TLS") == nullptr ? "posix,sysv,self" : nullptr;
    blocking_ = s_.blocking || options.blocking;
    chunk_bytes_ = std::max<size_t>(options.chunk_bytes, 16);
    // Allocated once, as large as any test sends: a late test's sends may still read it.
    send_buffer_.assign(std::max(chunk_bytes_, s_.message_bytes), 'p');
    std::string error;
    std::vector<uint8_t> address;
    try {
      transport_ = make_ucx_transport(blocking_, world_, tls, /*eager=*/true, /*copy_sends=*/false);
      address = transport_->address();
    } catch (const std::exception& e) {
      error = e.what();
    }
    raise_if_any(error, "starting UCX");
    const auto all = allgather(std::string(address.begin(), address.end()));
    std::vector<std::vector<uint8_t>> addresses;
    for (const auto& a : all) addresses.emplace_back(a.begin(), a.end());
    try {
      transport_->connect(addresses, rank_, std::vector<bool>(static_cast<size_t>(world_), false));
    } catch (const std::exception& e) {
      error = e.what();
    }
    raise_if_any(error, "connecting UCX endpoints");
  }

  // ---- the two kinds of test every rank runs: ping-pongs and flows ---------------------------

  // One-way latency (10th-percentile round trip / 2) of each pair; pairs must be disjoint. Rank 0 gets
  // the figures by pair (seconds, -1 where a pair failed).
  std::vector<double> pings(std::vector<std::pair<int, int>> pairs, int iterations) {
    bcast_pairs(pairs);
    bcast(iterations);
    const uint64_t tag = next_tag();
    std::vector<double> mine(pairs.size(), 0);
    std::string error;
    for (size_t p = 0; p < pairs.size(); ++p) {
      const auto [a, b] = pairs[p];
      if (rank_ != a && rank_ != b) continue;
      const int peer = rank_ == a ? b : a;
      std::vector<double> rtt;
      uint64_t word = 0;
      for (int i = 0; i < iterations + 3 && error.empty(); ++i) {
        const auto start = Clock::now();
        if (rank_ == a) {
          error = transfer(peer, &word, true, tag);
          if (error.empty()) error = transfer(peer, &word, false, tag);
        } else {
          error = transfer(peer, &word, false, tag);
          if (error.empty()) error = transfer(peer, &word, true, tag);
        }
        if (i >= 3) rtt.push_back(seconds_since(start));
      }
      if (rank_ == a && error.empty()) {
        // The 10th percentile, not the median: on shared cores most round trips include a
        // wait for the peer's turn on a core, which is not the link's latency.
        std::sort(rtt.begin(), rtt.end());
        mine[p] = rtt[rtt.size() / 10] / 2;
      }
    }
    progressing_barrier();
    raise_if_any(error, "measuring latency");
    return sum_on_rank0(mine);
  }

  struct FlowResult {
    std::vector<double> flow_rate;      // by flow, bytes/s at its receiver
    std::vector<double> receiver_rate;  // by rank, all its incoming flows together
    std::string late;                   // not empty: the test was late (kLateAfter), and who waited
    double total() const {
      double t = 0;
      for (double r : receiver_rate) t += r;
      return t;
    }
  };

  // Every flow (src -> dst, one per pair) sends for `duration` seconds at once, W messages in
  // flight each; receivers time what arrives after a warm-up. Rank 0 gets the rates.
  FlowResult flows(std::vector<std::pair<int, int>> flows, double duration, bool within_machines = false) {
    bcast_pairs(flows);
    bcast(duration);
    int within = within_machines;
    bcast(within);
    const uint64_t phase_tag = next_tag();
    auto tag_of = [&](int src) { return phase_tag | (static_cast<uint64_t>(src + 1) << tag::kChunkBits); };
    // Inside a machine the runtime moves whole chunks (FLEXPLAN_CHUNK_BYTES, 1 MiB); between
    // machines the link, not the message, sets the rate, and smaller messages give more
    // arrivals to time.
    const size_t msg = within ? chunk_bytes_ : s_.message_bytes;
    const unsigned w = s_.window;
    struct Out { int flow, dst; std::vector<Slot> slots; uint64_t sent = 0; bool ended = false; Slot end; };
    struct In {
      int flow, src;
      std::vector<Slot> slots;
      uint64_t received = 0;
      int64_t expected = -1;
      std::vector<std::pair<double, size_t>> arrivals;  // seconds since start, bytes
    };
    // On the heap: a late test's transfers may complete after it is abandoned, into its slots.
    auto state = std::make_shared<std::pair<std::vector<Out>, std::vector<In>>>();
    auto& outs = state->first;
    auto& ins = state->second;
    outs.reserve(flows.size());
    ins.reserve(flows.size());
    for (size_t f = 0; f < flows.size(); ++f) {
      if (flows[f].first == rank_) outs.push_back(Out{static_cast<int>(f), flows[f].second, std::vector<Slot>(w), 0, false, Slot{}});
      if (flows[f].second == rank_) ins.push_back(In{static_cast<int>(f), flows[f].first, std::vector<Slot>(w), 0, -1, {}});
    }
    std::string error;
    auto post_recv = [&](In& in, Slot& slot) {
      if (slot.buffer.size() < msg) slot.buffer.resize(msg);
      slot.done = false;
      slot.busy = true;
      const auto st = transport_->recv(slot.buffer.data(), msg, tag_of(in.src), &slot, &slot.request);
      if (!st.ok()) error = fmt::format("posting a receive from rank {}: {}", in.src, st.text);
    };
    for (auto& in : ins)
      for (auto& slot : in.slots) post_recv(in, slot);
    barrier();
    const auto start = Clock::now();
    const double warm = std::min(0.1, duration / 4);
    const double deadline = duration + kLateAfter;
    bool late = false;
    auto idle_since = Clock::now();
    while (error.empty()) {
      if (transport_->progress()) idle_since = Clock::now();
      const double now = seconds_since(start);
      bool pending = false;
      for (auto& out : outs) {
        for (auto& slot : out.slots) {
          if (slot.busy && slot.done) {
            if (!slot.status.ok()) error = fmt::format("sending to rank {}: {}", out.dst, slot.status.text);
            transport_->release(slot.request);
            slot.busy = false;
          }
          if (!slot.busy && now < duration && error.empty()) {
            slot.done = false;
            const auto st = transport_->send(out.dst, send_buffer_.data(), msg, tag_of(rank_), &slot, &slot.request);
            if (!st.ok()) error = fmt::format("sending to rank {}: {}", out.dst, st.text);
            else if (slot.request) slot.busy = true;
            ++out.sent;
          }
          pending |= slot.busy;
        }
        // Past the end and every message out: the end marker, a short message carrying the count.
        if (now >= duration && !out.ended && std::none_of(out.slots.begin(), out.slots.end(), [](const Slot& s) { return s.busy; })) {
          out.ended = true;
          std::memcpy(out.end.buffer.data() == nullptr ? (out.end.buffer.resize(8), out.end.buffer.data()) : out.end.buffer.data(), &out.sent, 8);
          out.end.done = false;
          const auto st = transport_->send(out.dst, out.end.buffer.data(), 8, tag_of(rank_), &out.end, &out.end.request);
          if (!st.ok()) error = fmt::format("sending to rank {}: {}", out.dst, st.text);
          out.end.busy = out.end.request != nullptr;
        }
        if (out.end.busy && out.end.done) {
          transport_->release(out.end.request);
          out.end.busy = false;
        }
        pending |= !out.ended || out.end.busy;
      }
      for (auto& in : ins) {
        for (auto& slot : in.slots) {
          if (!slot.busy || !slot.done) continue;
          transport_->release(slot.request);
          slot.busy = false;
          if (!slot.status.ok()) {
            error = fmt::format("receiving from rank {}: {}", in.src, slot.status.text);
            break;
          }
          if (slot.length == 8) {
            std::memcpy(&in.expected, slot.buffer.data(), 8);
          } else {
            ++in.received;
            in.arrivals.emplace_back(seconds_since(start), slot.length);
            if (in.expected < 0) post_recv(in, slot);
          }
        }
        pending |= in.expected < 0 || static_cast<int64_t>(in.received) < in.expected;
      }
      if (!pending) break;
      if (now > deadline) {
        late = true;
        break;
      }
      // As the runtime waits: yield a while (a peer on this core may be next), then sleep on
      // UCX's events, at most 1 ms (a TCP send that drains wakes nobody).
      if (blocking_) {
        if (Clock::now() - idle_since < std::chrono::microseconds(200)) sched_yield();
        else transport_->wait_for_event(std::chrono::milliseconds(1));
      }
    }
    // Receives still posted (the window beyond the last message): cancel, then wait them out.
    const auto cancel_start = Clock::now();
    for (auto& in : ins)
      for (auto& slot : in.slots)
        if (slot.busy && !slot.done) transport_->cancel(slot.request);
    for (bool any = true; any && seconds_since(cancel_start) < 5;) {
      transport_->progress();
      any = false;
      for (auto& in : ins)
        for (auto& slot : in.slots) {
          if (slot.busy && slot.done) {
            transport_->release(slot.request);
            slot.busy = false;
          }
          any |= slot.busy;
        }
    }
    // Every rank keeps its transfers moving until all are done: a sender whose last bytes still
    // wait in UCX's buffers for progress (its sends complete once buffered) must not block in
    // the group's exchange while its receivers wait for those bytes.
    progressing_barrier();
    raise_if_any(error, "measuring bandwidth");
    const std::string waited = late ? fmt::format("rank {} still waiting {:.0f} s past the end", rank_, kLateAfter) : "";
    const std::string late_ranks = join_non_empty(allgather(waited));
    if (!late_ranks.empty()) {
      abandoned_.push_back(state);  // their slots stay while UCX may still complete into them
      FlowResult r;
      r.late = late_ranks;
      return r;
    }
    std::vector<double> flow_rate(flows.size(), 0), receiver_rate(static_cast<size_t>(world_), 0);
    std::vector<std::pair<double, size_t>> all;
    for (const auto& in : ins) {
      flow_rate[static_cast<size_t>(in.flow)] = rate_of(in.arrivals, warm, duration);
      all.insert(all.end(), in.arrivals.begin(), in.arrivals.end());
    }
    std::sort(all.begin(), all.end());
    if (!ins.empty()) receiver_rate[static_cast<size_t>(rank_)] = rate_of(all, warm, duration);
    return FlowResult{sum_on_rank0(flow_rate), sum_on_rank0(receiver_rate), ""};
  }

  // The hop-overhead test's runs: the runtime itself (a Communicator, its engine, transport and
  // waiting) runs the ring all-reduce of `topology_text` (rank 0's, broadcast) on a float per
  // rank, over and over: 2(P-1) dependent steps of one 4-byte hop per rank. Per batch, the
  // slowest rank's seconds per all-reduce; rank 0 gets them and the schedule run.
  struct HopRuns {
    ir::Schedule schedule;
    double bytes = 0;
    std::vector<double> seconds;  // by batch
  };
  HopRuns hop_runs(const std::string& topology_text, int batches, double batch_seconds) {
    std::vector<char> text(topology_text.begin(), topology_text.end());
    bcast_vector(text);
    bcast(batches);
    bcast(batch_seconds);
    HopRuns out;
    std::string error;
    std::optional<ir::Plan> plan;
    try {
      const Topology topo = parse_topology(std::string(text.begin(), text.end()), "the hop test's topology");
      PlanOptions options;
      options.algorithms = {"ring"};
      plan = build_plan(topo, options);
      out.schedule = plan_ring(topo);
      out.schedule.min_bytes = 0;
      out.schedule.max_bytes.reset();
      plan->schedules = {out.schedule};
    } catch (const std::exception& e) {
      error = e.what();
    }
    raise_if_any(error, "planning the hop-overhead test");
    const size_t count = static_cast<size_t>(world_);
    out.bytes = 4.0 * static_cast<double>(count);
    std::vector<float> data(count, 1.0F);
    std::vector<double> mine(static_cast<size_t>(batches), 0);
    try {
      Options options = Options::from_env();
      options.allow_host_mismatch = names_overridden_;  // one host standing in for machines
      Communicator comm(std::move(*plan), std::make_unique<BorrowedGroup>(group_), options);
      auto run = [&](int times) {
        const auto start = Clock::now();
        for (int i = 0; i < times; ++i) comm.allreduce(data.data(), data.data(), count, DataType::Float32, ReduceOp::Max);
        return seconds_since(start) / times;
      };
      run(3);  // warm-up: connections, first touches
      barrier();
      double each = run(3);
      bcast(each);  // rank 0's figure sizes every rank's batches alike
      const int times = static_cast<int>(std::clamp(batch_seconds / std::max(each, 1e-6), 3.0, 2000.0));
      for (auto& b : mine) {
        barrier();
        b = run(times);
      }
    } catch (const std::exception& e) {
      error = e.what();
    }
    raise_if_any(error, "the hop-overhead test");
    const auto all = allgather(std::string(reinterpret_cast<const char*>(mine.data()), mine.size() * sizeof(double)));
    if (rank_ == 0) {
      out.seconds.assign(mine.size(), 0);
      for (const auto& theirs : all)
        for (size_t b = 0; b < mine.size() && theirs.size() == mine.size() * sizeof(double); ++b) {
          double v;
          std::memcpy(&v, theirs.data() + b * sizeof(double), sizeof(double));
          out.seconds[b] = std::max(out.seconds[b], v);
        }
    }
    return out;
  }

  // Rank 0 tells the others whether to go on (any other value: stop with that exit code).
  int bcast_int(int v) {
    bcast(v);
    return v;
  }

  void close() {
    if (!transport_) return;
    barrier();
    transport_->flush(std::chrono::milliseconds(2000));
    barrier();
    transport_->close_endpoints(true, std::chrono::milliseconds(1000));
    transport_.reset();
  }

 private:
  // Bytes per second of arrivals inside (warm, end]: from the first such arrival to the last,
  // so that the message size does not quantise the figure; the window's length when fewer
  // than three arrived.
  static double rate_of(const std::vector<std::pair<double, size_t>>& arrivals, double warm, double end) {
    std::vector<std::pair<double, size_t>> in;
    for (const auto& a : arrivals)
      if (a.first > warm && a.first <= end) in.push_back(a);
    if (in.size() < 3) {
      double bytes = 0;
      for (const auto& a : in) bytes += static_cast<double>(a.second);
      return bytes / (end - warm);
    }
    double bytes = 0;
    for (size_t i = 1; i < in.size(); ++i) bytes += static_cast<double>(in[i].second);
    const double span = in.back().first - in.front().first;
    return span > 0 ? bytes / span : 0;
  }

  // One blocking 8-byte transfer with a time limit; "" or the error.
  std::string transfer(int peer, uint64_t* word, bool send, uint64_t base) {
    Slot slot;
    const uint64_t t = base | (static_cast<uint64_t>((send ? rank_ : peer) + 1) << tag::kChunkBits);
    const auto st = send ? transport_->send(peer, word, 8, t, &slot, &slot.request)
                         : transport_->recv(word, 8, t, &slot, &slot.request);
    if (!st.ok()) return fmt::format("rank {}: {}", peer, st.text);
    if (!slot.request) return "";
    const auto start = Clock::now();
    while (!slot.done) {
      // Yield rather than sleep on the event fd: a wake-up costs more than the latency measured.
      if (!transport_->progress() && blocking_) sched_yield();
      if (seconds_since(start) > kTestGrace) {
        transport_->cancel(slot.request);
        for (int i = 0; i < 1000 && !slot.done; ++i) transport_->progress();
        if (slot.done) transport_->release(slot.request);
        return fmt::format("no answer from rank {} within {:.0f} s", peer, kTestGrace);
      }
    }
    transport_->release(slot.request);
    return slot.status.ok() ? "" : fmt::format("rank {}: {}", peer, slot.status.text);
  }

  uint64_t next_tag() { return tag::make(++phase_, 0, 0); }

  // The control exchanges, all over the group's one collective (allgather): rank 0's values to
  // every rank, every rank's figures summed on rank 0, and a barrier. They carry a few hundred
  // bytes per test, so a key-value store serves as well as MPI.
  void bcast_pairs(std::vector<std::pair<int, int>>& pairs) {
    std::vector<int> flat;
    for (const auto& [a, b] : pairs) {
      flat.push_back(a);
      flat.push_back(b);
    }
    bcast_vector(flat);
    pairs.resize(flat.size() / 2);
    for (size_t i = 0; i < pairs.size(); ++i) pairs[i] = {flat[2 * i], flat[2 * i + 1]};
  }

  template <class T>
  void bcast_vector(std::vector<T>& values) {
    static_assert(std::is_trivially_copyable_v<T>);
    std::string mine;
    if (rank_ == 0) mine.assign(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
    const std::string root = allgather(mine)[0];
    values.resize(root.size() / sizeof(T));
    std::memcpy(values.data(), root.data(), values.size() * sizeof(T));
  }

  template <class T>
  void bcast(T& value) {
    std::vector<T> one{value};
    bcast_vector(one);
    value = one.at(0);
  }

  // Every rank's vector (same length everywhere), summed element by element; the sum is rank 0's
  // (the other ranks get zeros, as they never read it).
  std::vector<double> sum_on_rank0(const std::vector<double>& mine) {
    const auto all = allgather(std::string(reinterpret_cast<const char*>(mine.data()), mine.size() * sizeof(double)));
    std::vector<double> sum(mine.size(), 0);
    if (rank_ != 0) return sum;
    for (const auto& theirs : all) {
      if (theirs.size() != mine.size() * sizeof(double))
        throw RuntimeError("flexplan-probe: the ranks disagree on a test's size (a rank runs another version?)");
      for (size_t i = 0; i < sum.size(); ++i) {
        double v;
        std::memcpy(&v, theirs.data() + i * sizeof(double), sizeof(double));
        sum[i] += v;
      }
    }
    return sum;
  }

  void barrier() { allgather(std::string()); }

  // A barrier that keeps UCX progressing while the others arrive.
  void progressing_barrier() {
    group_.barrier_start();
    while (!group_.barrier_done()) {
      if (!transport_->progress() && blocking_) transport_->wait_for_event(std::chrono::milliseconds(1));
    }
  }

  static std::string join_non_empty(const std::vector<std::string>& parts) {
    std::string out;
    for (const auto& p : parts)
      if (!p.empty()) out += (out.empty() ? "" : "; ") + p;
    return out;
  }

  std::vector<std::string> allgather(const std::string& mine) { return group_.allgather(mine); }

  // Every rank throws the same RuntimeError when any rank has an error.
  void raise_if_any(const std::string& error, const std::string& what) {
    const auto all = allgather(error);
    std::string text;
    for (int r = 0; r < world_; ++r)
      if (!all[static_cast<size_t>(r)].empty()) text += fmt::format("\n  rank {}: {}", r, all[static_cast<size_t>(r)]);
    if (!text.empty()) throw RuntimeError(fmt::format("flexplan-probe: {} failed:{}", what, text));
  }

  const Settings& s_;
  bootstrap::Group& group_;
  int rank_ = 0, world_ = 1;
  bool blocking_ = false;
  size_t chunk_bytes_ = size_t{1} << 20;
  uint64_t phase_ = 0;
  std::vector<std::string> real_hosts_;
  MachineGrouping grouping_;
  std::unique_ptr<Transport> transport_;
  std::vector<char> send_buffer_;
  std::vector<std::shared_ptr<void>> abandoned_;  // late tests' transfers, kept until the end
  bool names_overridden_ = false;                  // --machine-of-rank: machines are not hosts
};

// Round-robin rounds of disjoint pairs over `items` (the circle method).
std::vector<std::vector<std::pair<int, int>>> rounds_of(const std::vector<int>& items) {
  std::vector<int> v = items;
  if (v.size() % 2) v.push_back(-1);
  const size_t n = v.size();
  std::vector<std::vector<std::pair<int, int>>> rounds;
  for (size_t r = 0; r + 1 < n; ++r) {
    std::vector<std::pair<int, int>> round;
    for (size_t i = 0; i < n / 2; ++i) {
      const int a = v[i], b = v[n - 1 - i];
      if (a >= 0 && b >= 0) round.emplace_back(std::min(a, b), std::max(a, b));
    }
    if (!round.empty()) rounds.push_back(round);
    std::rotate(v.begin() + 1, v.end() - 1, v.end());
  }
  return rounds;
}

// The whole probe, on rank 0 (plans, records, infers) and the others (run what is broadcast).
class Run {
 public:
  Run(const Settings& s, Prober& p, Clock::time_point run_start)
      : s_(s), p_(p), g_(p.grouping()), start_(run_start) {
    const size_t machines = g_.names.size();
    m_.machine_names = g_.names;
    m_.machine_of_rank = g_.machine_of_rank;
    m_.learner_bandwidth.resize(static_cast<size_t>(p.world()));
    m_.learner_latency.resize(static_cast<size_t>(p.world()));
    m_.machine_out.resize(machines);
    m_.machine_in.resize(machines);
    m_.machine_latency.assign(machines, 0);
    m_.pair_latency.assign(machines, std::vector<double>(machines, -1));
  }
  Measurements& measurements() { return m_; }
  std::vector<std::string> floors() const {
    std::vector<std::string> out;
    for (size_t mach = 0; mach < g_.names.size(); ++mach)
      if (m_.machine_out[mach].lower_bound || m_.machine_in[mach].lower_bound) out.push_back(full_name_of_machine(static_cast<int>(mach)));
    for (const auto& gr : m_.groups)
      if (gr.out.lower_bound || gr.in.lower_bound) out.push_back(full_name_of_group(gr));
    return out;
  }

  void run(const std::vector<Group>& given) {
    const int machines = static_cast<int>(g_.names.size());
    const bool infer = given.empty() && !s_.no_infer;
    if (!given.empty()) {
      m_.groups = given;
      m_.tree_given = true;
      m_.tree_note = s_.slurm.empty() ? "given by --topology" : "given by --slurm";
    }
    // Intra-machine rounds: the k-th round of every machine together.
    for (const auto& ranks : g_.ranks) {
      const auto rs = rounds_of(ranks);
      for (size_t k = 0; k < rs.size(); ++k) {
        if (intra_rounds_.size() <= k) intra_rounds_.emplace_back();
        intra_rounds_[k].insert(intra_rounds_[k].end(), rs[k].begin(), rs[k].end());
      }
    }
    std::vector<int> all_machines(static_cast<size_t>(machines));
    for (int i = 0; i < machines; ++i) all_machines[static_cast<size_t>(i)] = i;
    machine_rounds_ = rounds_of(all_machines);
    const bool all_to_all = infer && machines >= 3;
    const size_t group_guess = given.empty() ? (infer ? 2 : 0) : given.size();
    const size_t tests = intra_rounds_.size() + (machines >= 2 ? 2 * static_cast<size_t>(machines) : 0) +
                         (all_to_all ? 1 : 0) + 2 * group_guess;
    // Two passes of every test must fit in most of the budget, with the setup and latencies
    // (counted from run_start), the end and the hop test kept back, each test costing
    // test_overhead_ more than its length; the rest goes to repeats.
    duration_ = std::clamp((s_.budget_s * 0.8 - elapsed() - kEndReserve - kHopTestReserve - 2.0) /
                                   std::max(1.0, 2.0 * static_cast<double>(tests)) -
                               test_overhead_,
                           0.15, 1.0);
    progress(fmt::format("{} ranks on {} machines ({}); {} bandwidth tests of {:.2f} s a pass, two passes, then "
                         "repeats of unstable figures until stable within {:.0f}% or the budget of {:.0f} s",
                         p_.world(), machines, machine_list(), tests, duration_, 100 * s_.tol, s_.budget_s));
    latencies();
    for (int pass = 1; pass <= 2; ++pass) {
      intra(pass);
      machine_links(pass);
      if (all_to_all) all_to_all_pass(pass);
    }
    if (infer) {
      if (machines >= 3) {
        infer_from_all_to_all();
      } else {
        m_.tree_note = "flat: fewer than three machines cannot show a shared bottleneck";
      }
      progress(m_.tree_note);
      for (const auto& gr : m_.groups)
        progress(fmt::format("  {}: machines {} (confidence {:.2f}: {})", gr.name, names_of(gr.machines), gr.confidence, gr.evidence));
    }
    for (int pass = 1; pass <= 2; ++pass) group_links(pass);
    if (infer) drop_groups_that_are_no_bottleneck();
    hop_overhead_test();
    // Repeat what is not yet stable while the budget lasts.
    for (int pass = 3; remaining() > test_cost() * 2; ++pass) {
      bool any = false;
      for (int mach = 0; machines >= 2 && mach < machines && remaining() > test_cost() * 2; ++mach) {
        if (!m_.machine_out[static_cast<size_t>(mach)].stable(s_.tol)) { machine_test(mach, true, pass); any = true; }
        if (!m_.machine_in[static_cast<size_t>(mach)].stable(s_.tol)) { machine_test(mach, false, pass); any = true; }
      }
      for (size_t gi = 0; gi < m_.groups.size() && remaining() > test_cost() * 2; ++gi) {
        if (!m_.groups[gi].out.stable(s_.tol)) { group_test(gi, true, pass); any = true; }
        if (!m_.groups[gi].in.stable(s_.tol)) { group_test(gi, false, pass); any = true; }
      }
      if (!any) break;
    }
    mark_floors();
    p_.bcast_int(-1);  // done
    price_hop_overhead();
  }

  // The other ranks: run what rank 0 broadcasts until it says done.
  static void follow(Prober& p) {
    while (true) {
      const int kind = p.bcast_int(0);
      if (kind == -1) return;
      if (kind == 1) p.pings({}, 0);
      else if (kind == 3) p.hop_runs("", 0, 0);
      else p.flows({}, 0);
    }
  }

  std::string report_text() const {
    std::string out;
    for (size_t mach = 0; g_.names.size() >= 2 && mach < g_.names.size(); ++mach) {
      const auto& o = m_.machine_out[mach];
      const auto& i = m_.machine_in[mach];
      out += fmt::format("  machine {}: out {}{} (spread {:.1f}%, {} samples), in {}{} (spread {:.1f}%, {} samples), latency {}\n",
                         g_.names[mach], o.lower_bound ? ">=" : "", format_bandwidth(o.value()), 100 * o.spread(),
                         o.samples.size(), i.lower_bound ? ">=" : "", format_bandwidth(i.value()), 100 * i.spread(),
                         i.samples.size(), format_latency(m_.machine_latency[mach]));
    }
    if (m_.hop_overhead.known())
      out += fmt::format("  hop overhead {} (spread {:.1f}%, {} batches; the ring all-reduce took {} a call, the links "
                         "alone {}, over {:.0f} hops)\n", format_latency(m_.hop_overhead.value()), 100 * m_.hop_overhead.spread(),
                         m_.hop_overhead.samples.size(), format_latency(Figure{hop_seconds_}.value()), format_latency(hop_base_),
                         hop_count_);
    if (late_tests_ > 0) out += fmt::format("  {} test{} late and run again\n", late_tests_, late_tests_ == 1 ? "" : "s");
    for (const auto& gr : m_.groups)
      out += fmt::format("  switch {} over {}: out {}{} (spread {:.1f}%), in {}{} (spread {:.1f}%)\n", gr.name,
                         names_of(gr.machines), gr.out.lower_bound ? ">=" : "", format_bandwidth(gr.out.value()),
                         100 * gr.out.spread(), gr.in.lower_bound ? ">=" : "", format_bandwidth(gr.in.value()),
                         100 * gr.in.spread());
    return out;
  }

  nlohmann::json report_json() const {
    auto fig = [](const Figure& f) {
      return nlohmann::json{{"value_bytes_per_s", f.value()}, {"samples", f.samples}, {"spread", f.spread()},
                            {"lower_bound", f.lower_bound}};
    };
    nlohmann::json j;
    j["seconds"] = elapsed();
    j["test_seconds"] = duration_;
    j["tolerance"] = s_.tol;
    j["tree"] = m_.tree_note;
    j["late_tests_run_again"] = late_tests_;
    if (m_.hop_overhead.known())
      j["hop_overhead"] = {{"value_s", m_.hop_overhead.value()}, {"samples_s", m_.hop_overhead.samples},
                           {"spread", m_.hop_overhead.spread()}, {"allreduce_s", hop_seconds_},
                           {"allreduce_bytes", hop_bytes_}, {"links_alone_s", hop_base_}, {"hops", hop_count_}};
    for (size_t mach = 0; mach < g_.names.size(); ++mach)
      j["machines"].push_back({{"name", g_.names[mach]}, {"ranks", g_.ranks[mach]}, {"out", fig(m_.machine_out[mach])},
                               {"in", fig(m_.machine_in[mach])}, {"latency_s", m_.machine_latency[mach]}});
    for (const auto& gr : m_.groups)
      j["switches"].push_back({{"name", gr.name}, {"machines", gr.machines}, {"out", fig(gr.out)}, {"in", fig(gr.in)},
                               {"confidence", gr.confidence}, {"evidence", gr.evidence}});
    if (!pair_results_.empty()) {
      // The evidence the tree was inferred from: every flow's samples, bytes/s, by machine pair.
      for (const auto& entry : pair_results_)
        j["all_to_all"].push_back({{"from", entry.first.first}, {"to", entry.first.second}, {"samples", entry.second.samples}});
      j["inference"] = {{"t", inference_.t}, {"t_needed", inference_.t_needed}, {"t_candidate", inference_.t_candidate},
                        {"contrast", inference_.contrast}, {"dof", inference_.dof}, {"candidates", !inference_.candidates.empty()}};
    }
    for (size_t r = 0; r < m_.learner_bandwidth.size(); ++r)
      j["learners"].push_back({{"rank", r}, {"bandwidth", fig(m_.learner_bandwidth[r])},
                               {"latency_s", m_.learner_latency[r].value()}});
    return j;
  }

 private:
  double elapsed() const { return seconds_since(start_); }
  // The budget holds for the whole run as its user sees it: from the launcher's start where it
  // is rank 0's ancestor, else the process's (run_start), and ending kEndReserve before it for
  // closing, writing and the launcher's end.
  double remaining() const { return s_.budget_s - kEndReserve - elapsed(); }
  double test_cost() const { return duration_ + test_overhead_; }
  void progress(const std::string& line) const { fmt::print(stderr, "flexplan-probe [{:5.1f} s] {}\n", elapsed(), line); }

  std::string machine_list() const {
    std::vector<std::string> parts;
    for (size_t mach = 0; mach < g_.names.size(); ++mach) parts.push_back(fmt::format("{}: {}", g_.names[mach], g_.ranks[mach].size()));
    return fmt::format("{}", fmt::join(parts, ", "));
  }
  std::string names_of(const std::vector<int>& machines) const {
    std::vector<std::string> n;
    for (int mach : machines) n.push_back(g_.names[static_cast<size_t>(mach)]);
    return fmt::format("{}", fmt::join(n, ","));
  }
  std::string full_name_of_machine(int mach) const {
    std::string path = g_.names[static_cast<size_t>(mach)];
    int inner = -1;
    for (size_t gi = 0; gi < m_.groups.size(); ++gi) {
      const auto& gm = m_.groups[gi].machines;
      if (std::find(gm.begin(), gm.end(), mach) != gm.end() &&
          (inner < 0 || gm.size() < m_.groups[static_cast<size_t>(inner)].machines.size()))
        inner = static_cast<int>(gi);
    }
    for (int gi = inner; gi >= 0; gi = m_.groups[static_cast<size_t>(gi)].parent) path = m_.groups[static_cast<size_t>(gi)].name + "/" + path;
    return "switch/" + path;
  }
  std::string full_name_of_group(const Group& gr) const {
    std::string path = gr.name;
    for (int gi = gr.parent; gi >= 0; gi = m_.groups[static_cast<size_t>(gi)].parent) path = m_.groups[static_cast<size_t>(gi)].name + "/" + path;
    return "switch/" + path;
  }

  std::vector<double> pings(const std::vector<std::pair<int, int>>& pairs, int iterations) {
    p_.bcast_int(1);
    return p_.pings(pairs, iterations);
  }
  // A test, run again once where it was late; late twice is a failure (exit 4). Each try's
  // cost beyond its length is kept, so that the repeats know what a test costs here.
  Prober::FlowResult flows(const std::vector<std::pair<int, int>>& f, bool within_machines = false) {
    for (int attempt = 1;; ++attempt) {
      const auto begin = Clock::now();
      p_.bcast_int(2);
      auto r = p_.flows(f, duration_, within_machines);
      const double overhead = seconds_since(begin) - duration_;
      if (r.late.empty()) {
        test_overhead_ = std::max(test_overhead_, 0.8 * test_overhead_ + 0.2 * overhead);
        return r;
      }
      if (attempt == 2)
        throw RuntimeError(fmt::format("flexplan-probe: a test of {} flows was late twice ({:.0f} s past its end): {}",
                                       f.size(), kLateAfter, r.late));
      ++late_tests_;
      progress(fmt::format("a test of {} flows was late ({}); run again", f.size(), r.late));
    }
  }

  // The hop overhead: the runtime's ring all-reduce of a few bytes, timed (Prober::hop_runs);
  // priced at the end on the measured topology.
  void hop_overhead_test() {
    p_.bcast_int(3);
    const auto runs = p_.hop_runs(to_topology_json(m_, s_.name).dump(), 5, 0.15);
    hop_schedule_ = runs.schedule;
    hop_bytes_ = runs.bytes;
    hop_seconds_ = runs.seconds;
    progress(fmt::format("hop overhead: the runtime's ring all-reduce of {} B took {} per call ({} batches, the slowest "
                         "rank's)", hop_bytes_, format_latency(Figure{hop_seconds_}.value()), hop_seconds_.size()));
  }

  // What the cost model must add per hop (CostParams::hop_overhead) to price that ring as it
  // ran: the model is linear in the overhead, so each batch's time t gives (t - price(0)) / k,
  // k the overheads the model counts on the ring's path (2(P-1), one per step). The links'
  // latencies and bytes are the measured topology's, so the figure is what a hop costs beyond
  // them; never below 0.
  void price_hop_overhead() {
    if (hop_seconds_.empty()) return;
    const Topology topo = parse_topology(to_topology_json(m_, s_.name).dump(), "the probe's topology");
    CostParams none, some;
    some.hop_overhead = 1e-3;
    hop_base_ = evaluate_schedule(topo, hop_schedule_, none).at(hop_bytes_);
    hop_count_ = (evaluate_schedule(topo, hop_schedule_, some).at(hop_bytes_) - hop_base_) / some.hop_overhead;
    if (!(hop_count_ > 0)) return;
    for (double t : hop_seconds_) m_.hop_overhead.samples.push_back(std::max(0.0, (t - hop_base_) / hop_count_));
  }

  void latencies() {
    std::vector<std::vector<double>> learner_pairs(static_cast<size_t>(p_.world()));
    for (const auto& round : intra_rounds_) {
      const auto lat = pings(round, 30);
      for (size_t i = 0; i < round.size(); ++i) {
        learner_pairs[static_cast<size_t>(round[i].first)].push_back(lat[i]);
        learner_pairs[static_cast<size_t>(round[i].second)].push_back(lat[i]);
      }
    }
    std::vector<double> every;
    for (const auto& v : learner_pairs) every.insert(every.end(), v.begin(), v.end());
    Figure overall{every};
    for (size_t r = 0; r < learner_pairs.size(); ++r) {
      // A learner's link holds half a pair's one-way latency; a lone learner takes the median.
      Figure f{learner_pairs[r]};
      const double v = f.known() ? f.value() : overall.known() ? overall.value() : 10e-6;
      m_.learner_latency[r].samples = {v / 2};
    }
    for (const auto& round : machine_rounds_) {
      std::vector<std::pair<int, int>> reps;
      for (const auto& [a, b] : round) reps.emplace_back(first_rank(a), first_rank(b));
      const auto lat = pings(reps, 30);
      for (size_t i = 0; i < round.size(); ++i) {
        const auto [a, b] = round[i];
        const double y = lat[i] - m_.learner_latency[static_cast<size_t>(reps[i].first)].value() -
                         m_.learner_latency[static_cast<size_t>(reps[i].second)].value();
        m_.pair_latency[static_cast<size_t>(a)][static_cast<size_t>(b)] = m_.pair_latency[static_cast<size_t>(b)][static_cast<size_t>(a)] = std::max(0.0, y);
      }
    }
    m_.machine_latency = fit_machine_latency(m_.pair_latency);
    std::vector<std::string> parts;
    for (size_t mach = 0; mach < g_.names.size(); ++mach) parts.push_back(fmt::format("{} {}", g_.names[mach], format_latency(m_.machine_latency[mach])));
    progress(fmt::format("latency: learner links {} (median of {} pairs); machine links {}",
                         overall.known() ? format_latency(overall.value() / 2) : "not measured (no machine has two learners)",
                         every.size(), fmt::join(parts, ", ")));
  }

  int first_rank(int mach) const { return g_.ranks[static_cast<size_t>(mach)].front(); }

  void intra(int pass) {
    if (intra_rounds_.empty()) {
      m_.learner_default = true;
      for (auto& f : m_.learner_bandwidth) f.samples = {10e9};
      if (pass == 1) progress("learner links: no machine has two learners; 10 GB/s assumed");
      return;
    }
    std::vector<std::vector<double>> rates(static_cast<size_t>(p_.world()));
    for (const auto& round : intra_rounds_) {
      const auto r = flows(round, /*within_machines=*/true);
      for (size_t i = 0; i < round.size(); ++i) {
        rates[static_cast<size_t>(round[i].first)].push_back(r.flow_rate[i]);
        rates[static_cast<size_t>(round[i].second)].push_back(r.flow_rate[i]);
      }
    }
    std::vector<double> every;
    for (const auto& v : rates) every.insert(every.end(), v.begin(), v.end());
    const Figure overall{every};
    for (size_t r = 0; r < rates.size(); ++r) {
      const Figure f{rates[r]};
      m_.learner_bandwidth[r].samples.push_back(f.known() ? f.value() : overall.value());
    }
    progress(fmt::format("learner links (pass {}): {} median of {} pair rates within machines", pass,
                         format_bandwidth(overall.value()), every.size()));
  }

  // Flows from every learner of `from` to the learners of `to`, each sender to one learner of
  // every receiving machine, spread so that the receivers' learners share the load.
  std::vector<std::pair<int, int>> spread(const std::vector<int>& from, const std::vector<int>& to) const {
    std::vector<std::pair<int, int>> f;
    size_t k = 0;
    for (int a : from)
      for (int ra : g_.ranks[static_cast<size_t>(a)]) {
        for (int b : to) {
          const auto& rb = g_.ranks[static_cast<size_t>(b)];
          f.emplace_back(ra, rb[k % rb.size()]);
        }
        ++k;
      }
    return f;
  }
  std::vector<int> others(const std::vector<int>& set) const {
    std::vector<int> o;
    for (int mach = 0; mach < static_cast<int>(g_.names.size()); ++mach)
      if (std::find(set.begin(), set.end(), mach) == set.end()) o.push_back(mach);
    return o;
  }

  void machine_test(int mach, bool out, int pass) {
    const std::vector<int> self{mach};
    const auto f = out ? spread(self, others(self)) : spread(others(self), self);
    const double rate = flows(f).total();
    (out ? m_.machine_out : m_.machine_in)[static_cast<size_t>(mach)].samples.push_back(rate);
    progress(fmt::format("machine {} {} (pass {}): {}", g_.names[static_cast<size_t>(mach)], out ? "out" : "in", pass, format_bandwidth(rate)));
  }
  void machine_links(int pass) {
    if (g_.names.size() < 2) return;
    for (int mach = 0; mach < static_cast<int>(g_.names.size()); ++mach) {
      machine_test(mach, true, pass);
      machine_test(mach, false, pass);
    }
  }

  // The most machines outside `set` can take in, and the most `set` can send out.
  double ceiling_out(const std::vector<int>& set) const {
    double receivers = 0, senders = 0;
    for (int o : others(set)) receivers += m_.machine_in[static_cast<size_t>(o)].value();
    for (int mach : set) senders += m_.machine_out[static_cast<size_t>(mach)].value();
    return std::min(receivers, senders);
  }
  double ceiling_in(const std::vector<int>& set) const {
    double senders = 0, receivers = 0;
    for (int o : others(set)) senders += m_.machine_out[static_cast<size_t>(o)].value();
    for (int mach : set) receivers += m_.machine_in[static_cast<size_t>(mach)].value();
    return std::min(receivers, senders);
  }

  // The switch tree from the all-to-all's samples so far (each flow's median).
  void infer_from_all_to_all() {
    const int machines = static_cast<int>(g_.names.size());
    std::vector<std::vector<double>> rate(static_cast<size_t>(machines), std::vector<double>(static_cast<size_t>(machines), 0));
    for (const auto& entry : pair_results_) rate[static_cast<size_t>(entry.first.first)][static_cast<size_t>(entry.first.second)] = entry.second.value();
    std::vector<double> out, in;
    for (int mach = 0; mach < machines; ++mach) {
      out.push_back(m_.machine_out[static_cast<size_t>(mach)].value());
      in.push_back(m_.machine_in[static_cast<size_t>(mach)].value());
    }
    inference_ = infer_tree(rate, 0.2, out, in);
    // Candidates are measured as switches are; their uplinks' tests keep or drop them.
    m_.groups = inference_.groups.empty() ? inference_.candidates : inference_.groups;
    m_.tree_note = inference_.note;
  }

  // Every machine sends to every other at once; what each machine's flows to each other one
  // reached (the inference reads which flows a shared uplink slowed).
  void all_to_all_pass(int pass) {
    const int machines = static_cast<int>(g_.names.size());
    std::vector<std::pair<int, int>> f;
    std::vector<std::pair<int, int>> machine_pair;
    for (int a = 0; a < machines; ++a) {
      const std::vector<int> self{a};
      for (const auto& flow : spread(self, others(self))) {
        f.push_back(flow);
        machine_pair.emplace_back(a, g_.machine_of_rank[static_cast<size_t>(flow.second)]);
      }
    }
    const auto r = flows(f);
    std::map<std::pair<int, int>, double> sum;
    for (size_t i = 0; i < f.size(); ++i) sum[machine_pair[i]] += r.flow_rate[i];
    for (const auto& entry : sum) pair_results_[entry.first].samples.push_back(entry.second);
    progress(fmt::format("all-to-all between machines (pass {}): {} in all", pass, format_bandwidth(r.total())));
  }

  // An inferred switch whose uplink carried what its machines could send and the others take,
  // both ways, limits nothing: it was the other switches' shadow (machines directly under the
  // top switch look alike in the all-to-all when racks slow their flows). Dropped.
  void drop_groups_that_are_no_bottleneck() {
    const double margin = std::max(0.1, 2 * s_.tol);
    std::vector<Group> kept;
    for (size_t gi = 0; gi < m_.groups.size(); ++gi) {
      const Group& g = m_.groups[gi];
      const UplinkVerdict v = judge_uplink(m_.groups, gi, m_.machine_out, m_.machine_in, margin);
      if (!v.limits) {
        progress(fmt::format("  {} (machines {}) dropped: its uplink carried {} out and {} in, {:.2f}x of all that its "
                             "machines and the rest allow: no bottleneck", g.name, names_of(g.machines),
                             format_bandwidth(g.out.value()), format_bandwidth(g.in.value()), v.ratio));
        continue;
      }
      // Kept: the uplink test confirms what the all-to-all suggested, the more surely the
      // further below what its machines and the rest allow it stayed.
      Group confirmed = g;
      confirmed.evidence += fmt::format("; its uplink carried {:.2f}x of what its machines and the rest allow", v.ratio);
      confirmed.confidence = std::max(confirmed.confidence, std::clamp((1 - v.ratio) / (2 * margin), 0.0, 1.0));
      if (g.twin) confirmed.confidence = std::min(confirmed.confidence, 0.5);
      progress(fmt::format("  {} (machines {}) confirmed: {}", g.name, names_of(g.machines), confirmed.evidence));
      kept.push_back(confirmed);
    }
    if (kept.size() != m_.groups.size()) {
      for (size_t gi = 0; gi < kept.size(); ++gi) kept[gi].name = fmt::format("group{}", gi);
      m_.tree_note += fmt::format("; {} kept after measuring their uplinks", kept.size());
    } else if (!kept.empty()) {
      m_.tree_note += "; confirmed by measuring their uplinks";
    }
    m_.groups = kept;  // with the confirmed groups' evidence and confidence
  }

  void group_test(size_t gi, bool out, int pass) {
    const auto& set = m_.groups[gi].machines;
    const auto f = out ? spread(set, others(set)) : spread(others(set), set);
    if (f.empty()) return;
    const double rate = flows(f).total();
    (out ? m_.groups[gi].out : m_.groups[gi].in).samples.push_back(rate);
    progress(fmt::format("switch {} {} (pass {}): {}", m_.groups[gi].name, out ? "out" : "in", pass, format_bandwidth(rate)));
  }
  void group_links(int pass) {
    for (size_t gi = 0; gi < m_.groups.size(); ++gi) {
      group_test(gi, true, pass);
      group_test(gi, false, pass);
    }
  }

  // A figure that reached what the other side could take is a floor, not the link's rate.
  void mark_floors() {
    const double margin = std::max(0.1, 2 * s_.tol);
    for (int mach = 0; mach < static_cast<int>(g_.names.size()); ++mach) {
      const std::vector<int> self{mach};
      double receivers = 0, senders = 0;
      for (int o : others(self)) {
        receivers += m_.machine_in[static_cast<size_t>(o)].value();
        senders += m_.machine_out[static_cast<size_t>(o)].value();
      }
      auto& out = m_.machine_out[static_cast<size_t>(mach)];
      auto& in = m_.machine_in[static_cast<size_t>(mach)];
      out.lower_bound = out.known() && out.value() >= (1 - margin) * receivers;
      in.lower_bound = in.known() && in.value() >= (1 - margin) * senders;
    }
    for (auto& gr : m_.groups) {
      gr.out.lower_bound = gr.out.known() && gr.out.value() >= (1 - margin) * ceiling_out(gr.machines);
      gr.in.lower_bound = gr.in.known() && gr.in.value() >= (1 - margin) * ceiling_in(gr.machines);
    }
  }

  const Settings& s_;
  Prober& p_;
  const MachineGrouping& g_;
  Clock::time_point start_;
  Measurements m_;
  double duration_ = 0.3;
  double test_overhead_ = 0.25;  // seconds a test costs beyond its length (grows to what is seen)
  int late_tests_ = 0;
  ir::Schedule hop_schedule_;
  double hop_bytes_ = 0, hop_base_ = 0, hop_count_ = 0;
  std::vector<double> hop_seconds_;
  std::vector<std::vector<std::pair<int, int>>> intra_rounds_, machine_rounds_;
  std::map<std::pair<int, int>, Figure> pair_results_;
  Inference inference_;
};

// Past twice the budget and a minute a probe process gives up (the watchdog below).
double time_limit_seconds(double budget_s) { return 2 * budget_s + 60; }

// The probe's command line, parsing into `s`; `launch` is how its help says to start it.
std::unique_ptr<CLI::App> make_command_line(Settings& s, const std::string& launch) {
  auto app = std::make_unique<CLI::App>("flexplan-probe: measure the cluster this job runs on and write its topology JSON.\n"
               "Run one process per learner: " + launch + " -o topology.json");
  app->add_option("-o,--output", s.output, "write the topology JSON here (default: standard output)");
  app->add_option("--report", s.report, "write every figure, its samples and spread, as JSON here");
  app->add_option("--budget", s.budget, "time for the whole probe (60s, 2m)")->capture_default_str();
  app->add_option("--tolerance", s.tolerance, "a figure is stable when its samples agree within this")->capture_default_str();
  app->add_option("--topology", s.topology, "take the switch tree from this topology JSON (its machines must group the ranks as the hosts do)");
  app->add_option("--slurm", s.slurm, "take the switch tree from Slurm's topology.conf (tree plugin; machines matched by host name)");
  app->add_option("--compare", s.compare, "compare each measured link with this topology's; exit 1 when any is off");
  app->add_option("--compare-tolerance", s.compare_tolerance, "how far off a link may be in --compare")->capture_default_str();
  app->add_option("--machine-of-rank", s.machine_of_rank,
                 "machine name of every rank, comma-separated (default: the host name; also FLEXPLAN_PROBE_MACHINES)");
  app->add_option("--name", s.name, "the topology's name")->capture_default_str();
  app->add_option("--message", s.message, "bytes per message in the bandwidth tests")->capture_default_str();
  app->add_flag("--blocking", s.blocking, "sleep on UCX events instead of polling (oversubscribed cores; also FLEXPLAN_BLOCKING=1)");
  app->add_flag("--flat", s.no_infer, "do not infer switches: every machine under one switch");
  return app;
}

}  // namespace
}  // namespace flexplan::probe

namespace {

// Never a hang: past twice the budget and a minute, the process gives up (mpirun then ends
// the job). Every wait inside has its own limit; this catches what MPI itself might wait on.
class Watchdog {
 public:
  Watchdog(double seconds, int rank) {
    thread_ = std::thread([this, seconds, rank] {
      std::unique_lock<std::mutex> lock(mutex_);
      if (!cv_.wait_for(lock, std::chrono::duration<double>(seconds), [this] { return stop_; })) {
        std::fprintf(stderr, "flexplan: error: flexplan-probe rank %d still running %.0f s after it started; giving up\n",
                     rank, seconds);
        std::fflush(stderr);
        _exit(flexplan::probe::kExitFailed);
      }
    });
  }
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace

namespace flexplan::probe {

int run_probe(bootstrap::Group& group, int argc, const char* const* argv, const std::string& launch) {
  const Clock::time_point started = run_start();
  const int rank = group.rank(), world = group.size();
  auto finish = [](int code) { return code; };
  auto fail = [&](int code, const std::string& message) {
    if (rank == 0) fmt::print(stderr, "flexplan: error: {}\n", message);
    return finish(code);
  };

  Settings s;
  const auto app_owner = make_command_line(s, launch);
  CLI::App& app = *app_owner;
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    if (rank == 0) fmt::print("{}", app.help());
    return finish(kExitOk);
  } catch (const CLI::ParseError& e) {
    return fail(kExitBadInput, fmt::format("{} (see flexplan-probe --help)", e.what()));
  }
  std::vector<std::string> override_names;
  try {
    s.budget_s = parse_seconds(s.budget, "--budget");
    s.tol = parse_fraction(s.tolerance, "--tolerance");
    s.cmp_tol = parse_fraction(s.compare_tolerance, "--compare-tolerance");
    const double bytes = parse_bandwidth(s.message + "B/s");
    if (bytes < 16 || bytes > 64e6) throw ProbeInputError(fmt::format("--message '{}': between 16 bytes and 64 MB", s.message));
    s.message_bytes = static_cast<size_t>(bytes);
    if (s.machine_of_rank.empty() && std::getenv("FLEXPLAN_PROBE_MACHINES")) s.machine_of_rank = std::getenv("FLEXPLAN_PROBE_MACHINES");
    if (!s.machine_of_rank.empty()) override_names = parse_machine_of_rank(s.machine_of_rank, world);
    if (static_cast<int>(!s.topology.empty()) + static_cast<int>(!s.slurm.empty()) + static_cast<int>(s.no_infer) > 1)
      throw ProbeInputError("--topology, --slurm and --flat: give one of them");
  } catch (const std::exception& e) {
    return fail(kExitBadInput, e.what());
  }
  if (world < 2) return fail(kExitBadInput, "flexplan-probe needs at least 2 processes, one per learner: " + launch + " ...");

  Watchdog watchdog(time_limit_seconds(s.budget_s), rank);
  Prober prober(s, group);
  prober.find_machines(override_names);
  // Files are read on rank 0 alone (they may exist only where the job was started).
  std::vector<Group> given;
  std::optional<Topology> declared;
  std::string input_error;
  if (rank == 0) {
    try {
      if (!s.topology.empty()) given = groups_from_topology(load_topology(s.topology), prober.grouping(), s.topology);
      if (!s.slurm.empty()) given = groups_from_slurm(load_slurm_topology(s.slurm), prober.grouping());
      // A given tree without switches below the top is flat: nothing to infer.
      if (given.empty() && (!s.topology.empty() || !s.slurm.empty())) s.no_infer = true;
      if (!s.compare.empty()) declared.emplace(load_topology(s.compare));
    } catch (const TopologyError& e) {
      input_error = e.what();
    } catch (const std::exception& e) {
      input_error = e.what();
    }
  }
  if (prober.bcast_int(input_error.empty() ? 0 : kExitBadInput) != 0) return fail(kExitBadInput, input_error);

  int code = kExitOk;
  try {
    prober.connect();
    if (rank == 0) {
      Run run(s, prober, started);
      run.run(given);
      const auto json = to_topology_json(run.measurements(), s.name);
      const std::string text = json.dump(2) + "\n";
      const Topology measured = parse_topology(text, "probe output");  // what we write must read back
      fmt::print(stderr, "flexplan-probe: done in {:.1f} s (budget {:.0f} s)\n{}", run.report_json()["seconds"].get<double>(),
                 s.budget_s, run.report_text());
      if (s.output.empty()) {
        fmt::print("{}", text);
      } else {
        std::ofstream f(s.output);
        f << text;
        if (!f) throw ProbeInputError(fmt::format("{}: cannot write", s.output));
        fmt::print(stderr, "flexplan-probe: wrote {}\n", s.output);
      }
      if (!s.report.empty()) {
        std::ofstream f(s.report);
        f << run.report_json().dump(2) << "\n";
        if (!f) throw ProbeInputError(fmt::format("{}: cannot write", s.report));
      }
      if (declared) {
        const auto c = compare(*declared, measured, s.cmp_tol, 50e-6, run.floors());
        fmt::print("{}", format_comparison(c, s.cmp_tol));
        if (c.any_off() || !c.unmatched.empty()) code = kExitOff;
      }
    } else {
      Run::follow(prober);
    }
  } catch (const ProbeInputError& e) {
    if (rank == 0) fmt::print(stderr, "flexplan: error: {}\n", e.what());
    code = kExitBadInput;
  } catch (const std::exception& e) {
    if (rank == 0) fmt::print(stderr, "flexplan: error: {}\n", e.what());
    code = kExitFailed;
  }
  code = prober.bcast_int(code);
  try {
    prober.close();
  } catch (const std::exception&) {
  }
  return finish(code);
}

double probe_time_limit_seconds(int argc, const char* const* argv) {
  Settings s;
  const auto app = make_command_line(s, "");
  try {
    app->parse(argc, argv);
    return time_limit_seconds(parse_seconds(s.budget, "--budget"));
  } catch (const std::exception&) {
    return time_limit_seconds(60);  // the default budget's; run_probe reports the bad argument itself
  }
}

}  // namespace flexplan::probe
