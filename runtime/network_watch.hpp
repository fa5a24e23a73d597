// Following the network (docs/runtime.md): the per-schedule tallies of what calls cost on this
// rank, the drift check every window of calls with the ranks' verdict, the per-link estimates
// combined from every rank's figures, and the plan for the links measured. The engine drives it
// between calls; the exchanges between ranks are the engine's (bootstrap::Group).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "codegen/rank_program.hpp"
#include "ir/plan.hpp"
#include "planner/cost_model.hpp"
#include "runtime/call_stats.hpp"
#include "runtime/options.hpp"

namespace flexplan {

class Topology;

// What one uplink's steps took on one rank against their baseline: the summed time of the steps
// whose messages crossed it over their summed baseline time (low == high from one rank; the
// pair leaves room for a rank's range).
struct LinkObservation {
  int32_t node = -1;  // the topology node whose uplink it is
  double low = 1, high = 1;
};

// The steps of one rank whose messages crossed the same uplinks: their time in the window and
// what it was at the baseline's pace.
struct PathObservation {
  std::vector<int32_t> links;  // topology nodes whose uplinks, sorted
  double seconds = 0, baseline = 0;
};

// One rank's transfers with one peer in one direction over a window: the seconds they took
// (PeerWaits) and what the same bytes took at the baseline's pace.
struct PeerObservation {
  int32_t peer = -1;
  bool send = true;  // this rank's sends to the peer; else its receives from it
  double seconds = 0, baseline = 0;
  uint64_t transfers = 0;
  std::vector<int32_t> links;  // topology nodes whose uplinks the messages cross, sorted
};

// One rank's figures of a drift check, exchanged as text so that every rank decodes the same.
struct RankWindow {
  double ratio = 0;            // measured / predicted over the window (per call without a topology)
  double baseline = 0;         // the same over the schedule's first window (0: none)
  double mean_call = 0, baseline_call = 0;        // seconds per call
  double mean_outside = 0, baseline_outside = 0;  // seconds per call spent outside the runtime
  std::vector<LinkObservation> links;
  std::vector<PathObservation> paths;
  std::vector<PeerObservation> peers;
};
std::string encode_window(const RankWindow& window);
RankWindow decode_window(const std::string& text);  // throws std::invalid_argument

struct DriftVerdict {
  bool drifted = false;          // enough ranks saw it, and no one process explains it
  bool slower = true;            // else faster (a link came back)
  std::vector<int32_t> voting;   // ranks whose window left the baseline by more than the threshold
  int32_t slow_process = -1;     // a rank whose own time outside calls explains the others' wait
  double ratio = 1;              // the median of ratio / baseline over the voting ranks
};
// The ranks' common verdict (every rank computes it from the same windows). A window drifted if
// ratio / baseline leaves [1 / (1 + threshold), 1 + threshold]; the drift counts when at least
// half the ranks, and at least two where there are two, saw it. It is one slow process, not the
// network, when a rank's time outside calls grew by at least half what the others' calls grew.
DriftVerdict judge_drift(const std::vector<RankWindow>& ranks, double threshold);

// Per uplink node, the factor its time changed by, where it leaves the noise band
// [1 / (1 + threshold / 2), 1 + threshold / 2]. `ranks` is indexed by plan rank.
//
// From the ranks' peer observations where they sent any: each pair of ranks (sender, receiver) is
// judged by the end that changed least against its baseline, since a slow link lengthens both
// the sender's sends (they back up behind it) and the receiver's receives, while a late sender
// lengthens only the receives and a late receiver (rendezvous) only the sends. The pairs then
// stand for paths below; a blamed link's factor is the pairs' summed time over summed baseline,
// never beyond the most any rank's steps across that link slowed (a pair's wait can grow far more
// than the link's time per byte: its baseline wait may be near nothing).
//
// Else from the ranks' step paths where they sent any: a link
// whose paths together (by time) stayed within the band is unchanged; of the rest, the fewest links explain the
// changed paths (greedily: the link under the most changed time first, at those paths' summed
// time over their baseline time, down to links explaining a quarter of the first's), since steps
// that wait on one slow link slow every link they cross. Without paths, per link: the smallest factor any rank saw when all were slower, the
// largest when all were faster.
// `bandwidth`, by node, breaks ties between links that explain the same pairs (empty: none).
// `file_bandwidth`, by node, the topology file's rates: a link found faster is set back to its
// file rate and never above, so when the paths sped up only links now below their file rate can
// explain it (a restored link is then the one named, not another on the same paths); empty: any.
std::map<int32_t, double> combine_link_estimates(const std::vector<RankWindow>& ranks, double threshold,
                                                 std::span<const double> bandwidth = {},
                                                 std::span<const double> file_bandwidth = {});

class NetworkWatch {
 public:
  // `topology`: the plan's, or null (measured times only: no predictions, no re-planning).
  NetworkWatch(const Options& options, const ir::Plan& plan, int32_t rank, std::unique_ptr<Topology> topology);
  ~NetworkWatch();

  // A call of plan schedule `schedule` starts; true when a drift check is due before it (every
  // rank reaches it at the same call: they issue the same calls).
  bool note_start(size_t schedule) {
    auto& record = records_[schedule];
    return checking_ && ++record.started % window_ == 0;
  }
  // A call finished on this rank: its bytes, seconds from start to end, each step's seconds, and
  // the seconds the caller spent outside the runtime before it.
  void record(size_t schedule, uint64_t bytes, double seconds, std::span<const double> step_seconds,
              double outside, const PeerWaits* peer_waits = nullptr);

  // The drift check of `schedule` (nullopt: every schedule with calls, for an explicit
  // re-plan). The first check of a schedule drops its window (warm-up), the second sets its
  // baseline; both return nullopt: nothing to exchange. `program_of` gives this rank's program of a plan schedule.
  std::optional<RankWindow> window_for_check(std::optional<size_t> schedule,
                                             const std::function<const codegen::RankProgram&(size_t)>& program_of);
  // A line for the verdict, naming the schedule, the level whose steps slowed most and the links
  // (nullopt schedule: every schedule).
  std::string describe_drift(std::optional<size_t> schedule, const DriftVerdict& verdict,
                             const std::map<int32_t, double>& links) const;
  bool drift_reported(size_t schedule) const { return records_[schedule].drift_reported; }
  // A drift check's verdict for `schedule`: the checks in a row, this one included, that drifted
  // the same way (0 where this one did not).
  unsigned note_verdict(size_t schedule, bool drifted, bool slower);
  // How much less time `fresh` is predicted to take than `current` for the calls made so far
  // (their sizes, per schedule), both priced at the figures `fresh` was made for: 0.2 = 20% less.
  double predicted_gain(const ir::Plan& current, const ir::Plan& fresh) const;
  // Whether the figures of the plan last made are the topology file's (every link as loaded).
  bool candidate_is_file() const { return at_file_rates(candidate_.get()); }
  // Whether every uplink of the topology in use is at the topology file's rate.
  bool current_is_file() const { return at_file_rates(topology_.get()); }
  void set_drift_reported(size_t schedule) { records_[schedule].drift_reported = true; }

  bool can_replan() const { return topology_ != nullptr; }
  // By topology node, its uplink's bandwidth in the current figures (empty without a topology).
  std::vector<double> uplink_bandwidths() const;
  // The topology file's rate of each node's uplink (by node; the root's 0).
  std::vector<double> file_uplink_bandwidths() const;
  // The links the ranks' windows blame (combine_link_estimates against the current figures and
  // the topology file's rates).
  std::map<int32_t, double> link_estimates(const std::vector<RankWindow>& windows, double threshold) const {
    return combine_link_estimates(windows, threshold, uplink_bandwidths(), file_uplink_bandwidths());
  }
  // Makes the candidate figures: the current ones changed by `links` (factors of time: a link 4x
  // slower has a quarter of its bandwidth; never above the topology file's). candidate_is_file()
  // then says whether they are the file's own.
  void set_candidate_links(const std::map<int32_t, double>& links);
  // The plan for the candidate figures, for the collectives and roots of `current`, verified for
  // this rank. Throws with the reason where it cannot be made.
  ir::Plan plan_for_candidate(const ir::Plan& current, double* seconds) const;
  // Every rank switched to `plan`: keep the figures it was made for, retire the old tallies.
  void adopt(const ir::Plan& plan);

  CommStats stats() const;
  void add_event(std::string event) { events_.push_back(std::move(event)); }
  uint32_t generation() const { return generation_; }

 private:
  struct Tally {
    uint64_t calls = 0;
    double seconds = 0, outside = 0;
    std::vector<double> steps;
    std::vector<std::pair<uint64_t, uint64_t>> sizes;  // (bytes, calls), a few distinct sizes
    PeerWaits waits;  // summed over the calls (windows only)
    void add(uint64_t bytes, double call_seconds, std::span<const double> step_seconds, double outside_seconds,
             const PeerWaits* peer_waits);
  };
  struct Record {
    uint64_t started = 0;
    Tally total, window;
    bool warmed_up = false;
    bool has_baseline = false;
    RankWindow baseline;               // ratio, mean call, mean outside
    std::vector<double> step_baseline;  // measured / predicted per step (1 where unpredicted)
    PeerWaits peer_baseline;            // the baseline window's transfers per peer
    bool drift_reported = false;
    unsigned streak = 0;        // drift checks in a row that drifted the same way
    bool streak_slower = true;
    std::vector<StepCost> costs;  // per step; empty: no prediction
    std::vector<std::vector<int32_t>> step_links;  // uplinks this rank's messages cross, per step
    bool links_known = false;
  };
  void price(size_t schedule);
  double predicted(const Record& record, const Tally& tally, size_t step) const;  // < 0: unknown
  double predicted_call(const Record& record, const Tally& tally) const;
  ScheduleStats stats_of(const ir::Schedule& schedule, const Record& record) const;
  // Whether every uplink of `topology` (null: false) is at the topology file's rate.
  bool at_file_rates(const Topology* topology) const;

  const ir::Plan* plan_;
  int32_t rank_;
  double chunk_bytes_;
  bool checking_;
  bool timed_;
  uint64_t window_;
  std::unique_ptr<Topology> topology_;       // current figures (changed by re-plans)
  std::unique_ptr<Topology> file_topology_;  // as loaded: re-planning never exceeds its rates
  std::unique_ptr<Topology> candidate_;      // the figures of the plan last made, until adopted
  mutable std::vector<Record> records_;      // by plan schedule
  std::vector<ScheduleStats> retired_;       // of earlier plans
  std::vector<std::string> events_;
  uint32_t generation_ = 0;
};

}  // namespace flexplan
