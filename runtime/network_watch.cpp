// NetworkWatch and the verdict and estimates it exchanges (network_watch.hpp).
#include "runtime/network_watch.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <set>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>

#include "ir/job_plan.hpp"
#include "ir/pipeline_form.hpp"
#include "planner/algorithm_table.hpp"
#include "planner/cost_model.hpp"
#include "planner/critical_path.hpp"
#include "planner/plan_builder.hpp"
#include "planner/size_format.hpp"
#include "topology/topology.hpp"

namespace flexplan {

namespace {
// Distinct call sizes a tally keeps apart; beyond, a size joins the nearest kept one.
constexpr size_t kMaxSizes = 32;
// A transfer's wait that is the host's scheduling, not a link (pair_paths).
constexpr double kWaitNoiseSeconds = 50e-6;

double median(std::vector<double> values) {
  if (values.empty()) return 1;
  std::sort(values.begin(), values.end());
  const size_t mid = values.size() / 2;
  return values.size() % 2 ? values[mid] : (values[mid - 1] + values[mid]) / 2;
}

// The cost model of the runtime's predictions and re-plans: the plan command's defaults (the
// measured hop overhead and star incast loss), so that a plan made here for the file's figures is
// the one `flexplan` writes by default; priced per rank whatever the library's default, since
// with drift checks on the runtime runs step by step (docs/runtime.md, "Step semantics").
CostParams runtime_cost(const Topology& topology, double chunk_bytes) {
  CostParams params;
  params.hop_overhead = kMeasuredHopOverhead;
  params.incast_loss = kMeasuredIncastLoss;
  params.slice_progress = SliceProgress::PerRank;
  params.reduce_bandwidth = topology.reduce_bandwidth();
  params.chunk_bytes = chunk_bytes;
  return params;
}

std::string range_text(const ir::Schedule& schedule) {
  return fmt::format("[{}, {})", format_bytes(static_cast<double>(schedule.min_bytes)),
                     schedule.max_bytes ? format_bytes(static_cast<double>(*schedule.max_bytes)) : "inf");
}

// The tree level of program step k (a compact pipeline's expansion step: its base step's).
int32_t step_level(const ir::Schedule& schedule, size_t k) {
  const size_t base = schedule.slices > 1 ? ir::expanded_step_label(schedule, k) : k;
  return base < schedule.steps.size() ? schedule.steps[base].level : 0;
}

std::string schedule_name(const ir::Schedule& schedule) {
  std::string name = fmt::format("{} {}", ir::to_string(schedule.collective), schedule.algorithm);
  if (ir::has_root(schedule.collective)) name += fmt::format(" root {}", schedule.root);
  return name + " " + range_text(schedule);
}
}  // namespace

// --- exchanged figures ------------------------------------------------------------------------

std::string encode_window(const RankWindow& w) {
  // %a: exact, so that every rank decodes the very doubles that were sent.
  std::string text = fmt::format("{:a} {:a} {:a} {:a} {:a} {:a} {}", w.ratio, w.baseline, w.mean_call,
                                 w.baseline_call, w.mean_outside, w.baseline_outside, w.links.size());
  for (const LinkObservation& link : w.links) text += fmt::format(" {} {:a} {:a}", link.node, link.low, link.high);
  text += fmt::format(" {}", w.paths.size());
  for (const PathObservation& path : w.paths) {
    text += fmt::format(" {:a} {:a} {}", path.seconds, path.baseline, path.links.size());
    for (const int32_t node : path.links) text += fmt::format(" {}", node);
  }
  text += fmt::format(" {}", w.peers.size());
  for (const PeerObservation& peer : w.peers) {
    text += fmt::format(" {} {} {:a} {:a} {} {}", peer.peer, peer.send ? 1 : 0, peer.seconds, peer.baseline,
                        peer.transfers, peer.links.size());
    for (const int32_t node : peer.links) text += fmt::format(" {}", node);
  }
  return text;
}

RankWindow decode_window(const std::string& text) {
  std::istringstream in(text);
  RankWindow w;
  size_t links = 0;
  const auto number = [&](double& value) {
    std::string word;
    if (!(in >> word)) throw std::invalid_argument("a truncated drift record");
    value = std::strtod(word.c_str(), nullptr);
  };
  number(w.ratio);
  number(w.baseline);
  number(w.mean_call);
  number(w.baseline_call);
  number(w.mean_outside);
  number(w.baseline_outside);
  if (!(in >> links) || links > 10'000'000) throw std::invalid_argument("a malformed drift record");
  w.links.resize(links);
  for (LinkObservation& link : w.links) {
    if (!(in >> link.node)) throw std::invalid_argument("a truncated drift record");
    number(link.low);
    number(link.high);
  }
  size_t paths = 0;
  if (!(in >> paths) || paths > 10'000'000) throw std::invalid_argument("a malformed drift record");
  w.paths.resize(paths);
  for (PathObservation& path : w.paths) {
    size_t nodes = 0;
    number(path.seconds);
    number(path.baseline);
    if (!(in >> nodes) || nodes > 10'000'000) throw std::invalid_argument("a malformed drift record");
    path.links.resize(nodes);
    for (int32_t& node : path.links)
      if (!(in >> node)) throw std::invalid_argument("a truncated drift record");
  }
  size_t peers = 0;
  if (!(in >> peers) || peers > 10'000'000) throw std::invalid_argument("a malformed drift record");
  w.peers.resize(peers);
  for (PeerObservation& peer : w.peers) {
    int send = 0;
    size_t nodes = 0;
    if (!(in >> peer.peer >> send)) throw std::invalid_argument("a truncated drift record");
    peer.send = send != 0;
    number(peer.seconds);
    number(peer.baseline);
    if (!(in >> peer.transfers >> nodes) || nodes > 10'000'000) throw std::invalid_argument("a malformed drift record");
    peer.links.resize(nodes);
    for (int32_t& node : peer.links)
      if (!(in >> node)) throw std::invalid_argument("a truncated drift record");
  }
  return w;
}

DriftVerdict judge_drift(const std::vector<RankWindow>& ranks, double threshold) {
  DriftVerdict verdict;
  std::vector<double> slower, faster;
  for (size_t r = 0; r < ranks.size(); ++r) {
    const RankWindow& w = ranks[r];
    if (w.baseline <= 0 || w.ratio <= 0) continue;
    const double change = w.ratio / w.baseline;
    if (change > 1 + threshold) slower.push_back(change);
    if (change < 1 / (1 + threshold)) faster.push_back(change);
  }
  verdict.slower = slower.size() >= faster.size();
  const auto& side = verdict.slower ? slower : faster;
  for (size_t r = 0; r < ranks.size(); ++r) {
    const RankWindow& w = ranks[r];
    if (w.baseline <= 0 || w.ratio <= 0) continue;
    const double change = w.ratio / w.baseline;
    if (verdict.slower ? change > 1 + threshold : change < 1 / (1 + threshold))
      verdict.voting.push_back(static_cast<int32_t>(r));
  }
  const size_t world = ranks.size();
  const size_t needed = std::max<size_t>((world + 1) / 2, std::min<size_t>(2, world));
  if (side.size() < needed || side.empty()) return verdict;
  verdict.ratio = median(side);
  if (verdict.slower) {
    // Calls that wait longer because one process comes late: that process's own time outside
    // the runtime grew by about what the others' calls grew.
    std::vector<double> call_growth;
    for (const int32_t r : verdict.voting) {
      const RankWindow& w = ranks[static_cast<size_t>(r)];
      call_growth.push_back(w.mean_call - w.baseline_call);
    }
    const double growth = median(call_growth);
    double largest = 0;
    for (size_t r = 0; r < world; ++r) {
      const double outside = ranks[r].mean_outside - ranks[r].baseline_outside;
      if (growth > 0 && outside >= 0.5 * growth && outside > largest) {
        largest = outside;
        verdict.slow_process = static_cast<int32_t>(r);
      }
    }
    if (verdict.slow_process >= 0) return verdict;
  }
  verdict.drifted = true;
  return verdict;
}

namespace {
// The fewest links that explain the paths changed beyond `band` one way (slower, or faster with
// `faster`): combine_link_estimates with paths.
std::map<int32_t, double> explain_paths(const std::vector<const PathObservation*>& paths, double band, bool faster,
                                        std::span<const double> bandwidth = {}, bool pairs = false,
                                        const std::function<bool(int32_t)>& may_explain = {}) {
  // With pairs, a path counts as changed only where its change in time is at least a quarter of
  // the most changed path's: a busy host's scheduling moves an idle pair's waits past the band
  // too, by far less than a slowed link moves the pairs across it.
  double most = 0;
  if (pairs) {
    for (const PathObservation* p : paths) {
      const double change = p->seconds / p->baseline;
      if (faster ? change < 1 / band : change > band) most = std::max(most, std::abs(p->seconds - p->baseline));
    }
  }
  const auto changed = [&](const PathObservation& p) {
    const double change = p.seconds / p.baseline;
    if (pairs && std::abs(p.seconds - p.baseline) < most / 4) return false;
    return faster ? change < 1 / band : change > band;
  };
  // A link whose paths, all of them together, stayed within the band (or changed the other way)
  // is not a cause: by time, so that one short path at the old pace does not clear a link whose
  // long paths slowed.
  std::map<int32_t, std::pair<double, double>> over_all;  // node -> (seconds, baseline)
  for (const PathObservation* p : paths) {
    for (const int32_t node : p->links) {
      over_all[node].first += p->seconds;
      over_all[node].second += p->baseline;
    }
  }
  std::set<int32_t> cleared;
  for (const auto& [node, times] : over_all) {
    const double change = times.first / times.second;
    if (faster ? !(change < 1 / band) : !(change > band)) cleared.insert(node);
  }
  std::vector<const PathObservation*> open;
  std::map<int32_t, double> steady;  // node -> baseline time of the unchanged paths crossing it
  for (const PathObservation* p : paths) {
    if (changed(*p)) {
      open.push_back(p);
    } else {
      for (const int32_t node : p->links) steady[node] += p->baseline;
    }
  }
  const auto steady_time = [&](int32_t node) {
    const auto it = steady.find(node);
    return it == steady.end() ? 0.0 : it->second;
  };
  const auto bandwidth_of = [&](int32_t node) {
    return node >= 0 && static_cast<size_t>(node) < bandwidth.size() ? bandwidth[static_cast<size_t>(node)] : 0.0;
  };
  std::map<int32_t, double> factors;
  double first_weight = 0;
  while (true) {
    std::map<int32_t, double> weight;  // node -> changed time it could explain
    for (const PathObservation* p : open)
      for (const int32_t node : p->links)
        if (!cleared.count(node) && (!may_explain || may_explain(node))) weight[node] += std::abs(p->seconds - p->baseline);
    if (weight.empty()) break;
    auto best = std::max_element(weight.begin(), weight.end(),
                                 [](const auto& a, const auto& b) { return a.second < b.second; });
    // Links that explain (nearly) the same changed time, as links in series do (every changed
    // path crosses them all), cannot be told apart by that time: the one that carries the least
    // unchanged time is taken (a slowed link slows every path across it), then the one of least
    // bandwidth (the smallest change to the figures that explains the paths).
    const double top = best->second;
    for (auto it = weight.begin(); it != weight.end(); ++it) {
      if (it->second < 0.9 * top || it == best) continue;
      const double a = steady_time(it->first), b = steady_time(best->first);
      if (a < b || (a == b && bandwidth_of(it->first) > 0 && bandwidth_of(it->first) < bandwidth_of(best->first)))
        best = it;
    }
    // A link that explains under a quarter of what the first explained is left as noise (paths
    // of other ranks slowed by a busy host, not by a link).
    if (factors.empty()) first_weight = top;
    else if (top < first_weight / 4) break;
    const int32_t node = best->first;
    double seconds = 0, baseline = 0;
    std::vector<const PathObservation*> still_open;
    for (const PathObservation* p : open) {
      if (std::binary_search(p->links.begin(), p->links.end(), node)) {
        seconds += p->seconds;
        baseline += p->baseline;
      } else {
        still_open.push_back(p);
      }
    }
    factors[node] = seconds / baseline;
    cleared.insert(node);  // (explained: not picked again)
    open = std::move(still_open);
  }
  return factors;
}

// Per pair of ranks, the end nearer its baseline (combine_link_estimates), as a path of the
// links its messages cross.
std::vector<PathObservation> pair_paths(const std::vector<RankWindow>& ranks) {
  struct Side {
    double seconds = 0, baseline = 0;
    uint64_t transfers = 0;
    bool present = false;
  };
  struct Pair {
    Side send, recv;
    const std::vector<int32_t>* links = nullptr;
  };
  std::map<std::pair<int32_t, int32_t>, Pair> pairs;  // (sender, receiver)
  for (size_t r = 0; r < ranks.size(); ++r) {
    const auto self = static_cast<int32_t>(r);
    for (const PeerObservation& o : ranks[r].peers) {
      if (o.peer < 0 || o.peer == self || !(o.seconds >= 0) || !(o.baseline >= 0) || o.links.empty()) continue;
      Pair& pair = pairs[o.send ? std::make_pair(self, o.peer) : std::make_pair(o.peer, self)];
      Side& side = o.send ? pair.send : pair.recv;
      side.seconds += o.seconds;
      side.baseline += o.baseline;
      side.transfers += o.transfers;
      side.present = true;
      pair.links = &o.links;
    }
  }
  std::vector<PathObservation> paths;
  for (const auto& entry : pairs) {
    const Pair& pair = entry.second;
    if (!pair.send.present || !pair.recv.present) continue;
    // A wait of a few microseconds a transfer is the host's noise, not a link: added to both
    // sides of each ratio, so that a near-zero baseline wait does not read as a huge change.
    const auto padded = [](const Side& side) {
      const double noise = kWaitNoiseSeconds * static_cast<double>(side.transfers);
      return std::make_pair(side.seconds + noise, side.baseline + noise);
    };
    const auto send = padded(pair.send);
    const auto recv = padded(pair.recv);
    const auto distance = [](const std::pair<double, double>& side) {
      return std::abs(std::log(side.first / side.second));
    };
    const auto& nearer = distance(send) <= distance(recv) ? send : recv;
    paths.push_back({*pair.links, nearer.first, nearer.second});
  }
  return paths;
}
}  // namespace

std::map<int32_t, double> combine_link_estimates(const std::vector<RankWindow>& ranks, double threshold,
                                                 std::span<const double> bandwidth,
                                                 std::span<const double> file_bandwidth) {
  const double band = 1 + threshold / 2;
  // Faster: only a link below its file rate can have come back (nothing is planned above it).
  const auto below_file = [&](int32_t node) {
    if (file_bandwidth.empty()) return true;
    const auto n = static_cast<size_t>(node);
    return node >= 0 && n < file_bandwidth.size() && n < bandwidth.size() && bandwidth[n] < file_bandwidth[n];
  };
  bool any_peers = false;
  for (const RankWindow& w : ranks) any_peers = any_peers || !w.peers.empty();
  if (any_peers) {
    const std::vector<PathObservation> pairs = pair_paths(ranks);
    std::vector<const PathObservation*> paths;
    double slower = 0, faster = 0;
    for (const PathObservation& p : pairs) {
      if (!(p.seconds > 0) || !(p.baseline > 0)) continue;
      paths.push_back(&p);
      const double change = p.seconds / p.baseline;
      if (change > band) slower += p.seconds - p.baseline;
      if (change < 1 / band) faster += p.baseline - p.seconds;
    }
    const bool slowed = slower >= faster;
    std::map<int32_t, double> factors;
    if (slower > 0 || faster > 0)
      factors = explain_paths(paths, band, !slowed, bandwidth, /*pairs=*/true,
                              slowed ? std::function<bool(int32_t)>{} : std::function<bool(int32_t)>(below_file));
    // Never beyond what the steps across the link show on the rank that saw most.
    std::map<int32_t, double> steps_most;
    for (const RankWindow& w : ranks) {
      for (const LinkObservation& link : w.links) {
        if (!(link.low > 0) || !(link.high > 0)) continue;
        auto [it, fresh] = steps_most.try_emplace(link.node, slowed ? link.high : link.low);
        if (!fresh) it->second = slowed ? std::max(it->second, link.high) : std::min(it->second, link.low);
      }
    }
    for (auto& [node, factor] : factors) {
      const auto it = steps_most.find(node);
      if (it == steps_most.end()) continue;
      factor = slowed ? std::min(factor, std::max(it->second, band)) : std::max(factor, std::min(it->second, 1 / band));
    }
    // No pair changed at both ends (a delay that does not back up the senders): the steps' paths.
    if (!factors.empty()) return factors;
  }
  std::vector<const PathObservation*> paths;
  for (const RankWindow& w : ranks)
    for (const PathObservation& p : w.paths)
      if (p.seconds > 0 && p.baseline > 0 && !p.links.empty()) paths.push_back(&p);
  if (!paths.empty()) {
    // Slower or faster: the side with more changed time.
    double slower = 0, faster = 0;
    for (const PathObservation* p : paths) {
      const double change = p->seconds / p->baseline;
      if (change > band) slower += p->seconds - p->baseline;
      if (change < 1 / band) faster += p->baseline - p->seconds;
    }
    if (slower == 0 && faster == 0) return {};
    return explain_paths(paths, band, faster > slower, {}, false,
                         faster > slower ? std::function<bool(int32_t)>(below_file) : std::function<bool(int32_t)>{});
  }
  std::map<int32_t, std::pair<double, double>> range;  // node -> (lowest, highest)
  for (const RankWindow& w : ranks) {
    for (const LinkObservation& link : w.links) {
      if (!(link.low > 0) || !(link.high > 0)) continue;
      auto [it, fresh] = range.try_emplace(link.node, link.low, link.high);
      if (!fresh) {
        it->second.first = std::min(it->second.first, link.low);
        it->second.second = std::max(it->second.second, link.high);
      }
    }
  }
  std::map<int32_t, double> factors;
  for (const auto& [node, lh] : range) {
    if (lh.first > band) factors[node] = lh.first;
    else if (lh.second < 1 / band && below_file(node)) factors[node] = lh.second;
  }
  return factors;
}

// --- tallies ----------------------------------------------------------------------------------

void NetworkWatch::Tally::add(uint64_t bytes, double call_seconds, std::span<const double> step_seconds,
                              double outside_seconds, const PeerWaits* peer_waits) {
  if (peer_waits != nullptr && !peer_waits->sends.empty()) {
    const size_t world = peer_waits->sends.size();
    if (waits.sends.size() != world) waits.reset(world);
    for (size_t p = 0; p < world; ++p) {
      waits.send_seconds[p] += peer_waits->send_seconds[p];
      waits.recv_seconds[p] += peer_waits->recv_seconds[p];
      waits.send_bytes[p] += peer_waits->send_bytes[p];
      waits.recv_bytes[p] += peer_waits->recv_bytes[p];
      waits.sends[p] += peer_waits->sends[p];
      waits.recvs[p] += peer_waits->recvs[p];
    }
  }
  ++calls;
  seconds += call_seconds;
  outside += outside_seconds;
  if (steps.size() < step_seconds.size()) steps.resize(step_seconds.size(), 0.0);
  for (size_t s = 0; s < step_seconds.size(); ++s) steps[s] += step_seconds[s];
  for (auto& [b, n] : sizes) {
    if (b == bytes) {
      ++n;
      return;
    }
  }
  if (sizes.size() < kMaxSizes) {
    sizes.emplace_back(bytes, 1);
    return;
  }
  auto nearest = std::min_element(sizes.begin(), sizes.end(), [&](const auto& a, const auto& b) {
    const auto distance = [&](uint64_t x) { return x > bytes ? x - bytes : bytes - x; };
    return distance(a.first) < distance(b.first);
  });
  ++nearest->second;
}

NetworkWatch::NetworkWatch(const Options& options, const ir::Plan& plan, int32_t rank,
                           std::unique_ptr<Topology> topology)
    : plan_(&plan),
      rank_(rank),
      chunk_bytes_(static_cast<double>(options.chunk_bytes)),
      checking_(options.replan != Replan::Off),
      timed_(options.stats_report || options.replan != Replan::Off),
      window_(std::max<unsigned>(options.drift_window, 2)),
      topology_(std::move(topology)),
      records_(plan.schedules.size()) {
  if (topology_) file_topology_ = std::make_unique<Topology>(*topology_);
}

NetworkWatch::~NetworkWatch() = default;

void NetworkWatch::record(size_t schedule, uint64_t bytes, double seconds, std::span<const double> step_seconds,
                          double outside, const PeerWaits* peer_waits) {
  Record& r = records_[schedule];
  r.total.add(bytes, seconds, step_seconds, outside, nullptr);
  if (checking_) r.window.add(bytes, seconds, step_seconds, outside, peer_waits);
}

void NetworkWatch::price(size_t schedule) {
  Record& r = records_[schedule];
  if (!r.costs.empty() || !topology_) return;
  const CostParams params = runtime_cost(*topology_, chunk_bytes_);
  try {
    // A compact pipeline is priced whole, step by step as the program runs it.
    const ir::Schedule& held = plan_->schedules[schedule];
    const ir::Schedule whole = held.slices > 1 ? ir::materialize(held) : ir::Schedule{};
    const ir::Schedule& priced = held.slices > 1 ? whole : held;
    auto costs = evaluate_steps(*topology_, priced, params);
    if (costs.size() == priced.steps.size()) r.costs = std::move(costs);
  } catch (const std::exception&) {
    // (A schedule the evaluator cannot price: measured times only.)
  }
}

double NetworkWatch::predicted(const Record& record, const Tally& tally, size_t step) const {
  if (step >= record.costs.size()) return -1;
  double total = 0;
  for (const auto& [bytes, calls] : tally.sizes)
    total += static_cast<double>(calls) * record.costs[step].at(static_cast<double>(bytes), chunk_bytes_);
  return total;
}

double NetworkWatch::predicted_call(const Record& record, const Tally& tally) const {
  if (record.costs.empty()) return -1;
  double total = 0;
  for (size_t s = 0; s < record.costs.size(); ++s) total += predicted(record, tally, s);
  return total;
}

std::optional<RankWindow> NetworkWatch::window_for_check(
    std::optional<size_t> only, const std::function<const codegen::RankProgram&(size_t)>& program_of) {
  RankWindow mine;
  double measured = 0, expected = 0, calls = 0, outside = 0;
  double base_expected = 0;  // the window's expected time at the baseline's ratios
  double base_call = 0, base_outside = 0;
  bool any_baseline = false, setting_baseline = false;
  // Per uplink: the time of the steps that crossed it, and what they took at the baseline; and
  // the same per set of uplinks crossed together (a path).
  std::map<int32_t, std::pair<double, double>> link_time;
  std::map<std::vector<int32_t>, std::pair<double, double>> path_time;
  // Per (peer, send): the transfers' seconds, at the baseline's pace per byte, and their count.
  std::map<std::pair<int32_t, bool>, PeerObservation> peer_time;
  for (size_t s = 0; s < records_.size(); ++s) {
    if (only && s != *only) continue;
    Record& r = records_[s];
    if (r.window.calls == 0) continue;
    price(s);
    const Tally& w = r.window;
    const double calls_here = static_cast<double>(w.calls);
    const double predicted_here = predicted_call(r, w);
    const double ratio = predicted_here > 0 ? w.seconds / predicted_here : w.seconds / calls_here;
    // Per step: measured against predicted (or per call), which the baseline's step ratio divides.
    std::vector<double> step_ratio(w.steps.size(), 0.0);
    for (size_t k = 0; k < w.steps.size(); ++k) {
      const double p = predicted(r, w, k);
      step_ratio[k] = p > 0 ? w.steps[k] / p : w.steps[k] / calls_here;
    }
    if (!r.has_baseline && only && !r.warmed_up) {
      // The first window warms up (lowering, first allocations, connections): not a baseline.
      r.warmed_up = true;
      r.window = Tally{};
      setting_baseline = true;
      continue;
    }
    if (!r.has_baseline && only) {
      // The first window of a drift check is the baseline: the model's error on this cluster.
      r.has_baseline = true;
      r.baseline.ratio = ratio;
      r.baseline.mean_call = w.seconds / calls_here;
      r.baseline.mean_outside = w.outside / calls_here;
      r.step_baseline = step_ratio;
      r.peer_baseline = w.waits;
      r.window = Tally{};
      setting_baseline = true;
      continue;
    }
    measured += w.seconds;
    calls += calls_here;
    outside += w.outside;
    expected += predicted_here > 0 ? predicted_here : calls_here;
    if (r.has_baseline) {
      any_baseline = true;
      base_expected += (predicted_here > 0 ? predicted_here : calls_here) * r.baseline.ratio;
      base_call += r.baseline.mean_call * calls_here;
      base_outside += r.baseline.mean_outside * calls_here;
    }
    // Which uplinks each step's messages cross on this rank (once per schedule).
    if (topology_ && !r.links_known) {
      const codegen::RankProgram& program = program_of(s);
      r.step_links.assign(program.steps.size(), {});
      for (size_t k = 0; k < program.steps.size(); ++k) {
        std::set<int32_t> nodes;
        const auto add_route = [&](int32_t from, int32_t to) {
          const Topology::Route route = topology_->route(from, to);
          nodes.insert(route.up.begin(), route.up.end());
          nodes.insert(route.down.begin(), route.down.end());
        };
        for (const codegen::Task& task : program.steps[k].tasks) {
          for (const codegen::Link& source : task.sources) add_route(source.rank, rank_);
          for (const codegen::Link& destination : task.destinations) add_route(rank_, destination.rank);
        }
        r.step_links[k].assign(nodes.begin(), nodes.end());
      }
      r.links_known = true;
    }
    if (r.links_known) {
      for (size_t k = 0; k < step_ratio.size() && k < r.step_links.size(); ++k) {
        if (step_ratio[k] <= 0) continue;
        const double base = k < r.step_baseline.size() && r.step_baseline[k] > 0 ? r.step_baseline[k] : 1.0;
        const double change = step_ratio[k] / base;
        for (const int32_t node : r.step_links[k]) {
          link_time[node].first += w.steps[k];
          link_time[node].second += w.steps[k] / change;
        }
        if (!r.step_links[k].empty()) {
          auto& path = path_time[r.step_links[k]];
          path.first += w.steps[k];
          path.second += w.steps[k] / change;
        }
      }
    }
    // Per peer, against the baseline window's seconds per byte (with a baseline: an explicit
    // re-plan before the first check has none, and the steps serve alone).
    if (topology_ && r.has_baseline && !w.waits.sends.empty() && r.peer_baseline.sends.size() == w.waits.sends.size()) {
      const PeerWaits& now = w.waits;
      const PeerWaits& base = r.peer_baseline;
      for (size_t p = 0; p < now.sends.size(); ++p) {
        const auto peer = static_cast<int32_t>(p);
        const auto add = [&](bool send, double seconds, uint64_t bytes, uint64_t transfers, double base_seconds,
                             uint64_t base_bytes, uint64_t base_transfers) {
          if (transfers == 0 || base_transfers == 0) return;
          // Per byte where there are bytes (a zero-count call's messages are empty), else per transfer.
          const double scale = bytes > 0 && base_bytes > 0
                                   ? static_cast<double>(bytes) / static_cast<double>(base_bytes)
                                   : static_cast<double>(transfers) / static_cast<double>(base_transfers);
          PeerObservation& o = peer_time[{peer, send}];
          if (o.links.empty()) {
            o.peer = peer;
            o.send = send;
            const Topology::Route route = send ? topology_->route(rank_, peer) : topology_->route(peer, rank_);
            std::set<int32_t> nodes(route.up.begin(), route.up.end());
            nodes.insert(route.down.begin(), route.down.end());
            o.links.assign(nodes.begin(), nodes.end());
          }
          o.seconds += seconds;
          o.baseline += base_seconds * scale;
          o.transfers += transfers;
        };
        add(true, now.send_seconds[p], now.send_bytes[p], now.sends[p], base.send_seconds[p], base.send_bytes[p],
            base.sends[p]);
        add(false, now.recv_seconds[p], now.recv_bytes[p], now.recvs[p], base.recv_seconds[p], base.recv_bytes[p],
            base.recvs[p]);
      }
    }
    r.window = Tally{};
  }
  if (setting_baseline && calls == 0) return std::nullopt;
  if (calls > 0) {
    mine.ratio = measured / expected;
    mine.mean_call = measured / calls;
    mine.mean_outside = outside / calls;
  }
  // Without a baseline (an explicit re-plan before the first check) the prediction is the baseline.
  mine.baseline = any_baseline ? base_expected / expected : (calls > 0 ? 1.0 : 0.0);
  mine.baseline_call = any_baseline ? base_call / calls : mine.mean_call;
  mine.baseline_outside = any_baseline ? base_outside / calls : mine.mean_outside;
  // Weighted by time, so that a pipeline's many short steps (its fill and drain) do not clear
  // a link that its long steps show slowed.
  for (const auto& [node, times] : link_time) {
    if (times.second <= 0) continue;
    const double change = times.first / times.second;
    mine.links.push_back({node, change, change});
  }
  for (const auto& [nodes, times] : path_time) mine.paths.push_back({nodes, times.first, times.second});
  for (auto& entry : peer_time)
    if (!entry.second.links.empty()) mine.peers.push_back(std::move(entry.second));
  return mine;
}

std::string NetworkWatch::describe_drift(std::optional<size_t> schedule, const DriftVerdict& verdict,
                                         const std::map<int32_t, double>& links) const {
  std::string text = fmt::format("{} {:.2f}x their baseline on ranks",
                                 schedule ? schedule_name(plan_->schedules[*schedule]) + ": calls" : "calls",
                                 verdict.ratio);
  for (const int32_t r : verdict.voting) text += fmt::format(" {}", r);
  if (verdict.slow_process >= 0) {
    return text + fmt::format("; rank {}'s own time outside the calls grew as much: one slow process, "
                              "not the network", verdict.slow_process);
  }
  // The level of the steps on this rank whose time changed most.
  if (schedule && records_[*schedule].links_known) {
    const ir::Schedule& s = plan_->schedules[*schedule];
    std::set<int32_t> levels;
    for (size_t k = 0; k < records_[*schedule].step_links.size(); ++k) {
      for (const int32_t node : records_[*schedule].step_links[k])
        if (links.count(node)) levels.insert(step_level(s, k));
    }
    if (!levels.empty()) {
      text += "; steps at level";
      for (const int32_t level : levels) text += fmt::format(" {}", level);
    }
  }
  if (links.empty()) return text + "; no single link stands out";
  text += "; links";
  for (const auto& [node, factor] : links) {
    const std::string name = topology_ ? topology_->full_name(node) : std::to_string(node);
    text += fmt::format(" {} {:.2f}x {}", name, factor >= 1 ? factor : 1 / factor, factor >= 1 ? "slower" : "faster");
  }
  return text;
}

void NetworkWatch::set_candidate_links(const std::map<int32_t, double>& links) {
  if (!topology_) throw std::runtime_error("no topology (FLEXPLAN_TOPOLOGY) to re-plan from");
  Topology changed = *topology_;
  std::vector<Topology::UplinkChange> changes;
  for (const auto& [node, factor] : links) {
    if (node <= 0 || node >= changed.num_nodes() || !(factor > 0)) continue;
    Link link = changed.uplink(node);
    // A link found faster came back: to the topology file's rate, the one figure known right for
    // it (a measured factor may fall short of the one it was slowed by, and a plan for a rate in
    // between would neither be the old plan nor stay put). Never above the file's.
    link.bandwidth = factor < 1 ? file_topology_->uplink(node).bandwidth
                                : std::min(link.bandwidth / factor, file_topology_->uplink(node).bandwidth);
    changes.push_back({node, link});
  }
  changed.set_uplinks(changes);
  candidate_ = std::make_unique<Topology>(std::move(changed));
}

ir::Plan NetworkWatch::plan_for_candidate(const ir::Plan& current, double* seconds) const {
  if (!candidate_) throw std::runtime_error("no candidate figures to plan for");
  const auto began = std::chrono::steady_clock::now();
  PlanOptions options;
  options.collectives.clear();
  for (const ir::Schedule& s : current.schedules) {
    if (std::find(options.collectives.begin(), options.collectives.end(), s.collective) == options.collectives.end())
      options.collectives.push_back(s.collective);
  }
  options.roots.clear();
  for (const ir::Schedule& s : current.schedules) {
    if (ir::has_root(s.collective) &&
        std::find(options.roots.begin(), options.roots.end(), s.root) == options.roots.end())
      options.roots.push_back(s.root);
  }
  if (options.roots.empty()) options.roots.push_back(0);
  options.cost = runtime_cost(*candidate_, chunk_bytes_);
  options.prepare_bases_in_parallel = false;  // (between calls: no threads of its own)
  ir::Plan plan = build_plan(*candidate_, options);
  ir::check_job_plan(plan, current.world_size, rank_);
  *seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  return plan;
}

unsigned NetworkWatch::note_verdict(size_t schedule, bool drifted, bool slower) {
  Record& r = records_[schedule];
  if (!drifted) {
    r.streak = 0;
  } else if (r.streak > 0 && r.streak_slower == slower) {
    ++r.streak;
  } else {
    r.streak = 1;
    r.streak_slower = slower;
  }
  return r.streak;
}

namespace {
// A schedule's predicted seconds for one call of `bytes` on `topology`, priced as the planner's
// race prices its row (the critical path for the rows priced so), so that a plan made for some
// figures is never predicted slower at them than the plan it would replace by a model the
// planner did not choose with.
double predicted_call_seconds(const Topology& topology, const ir::Schedule& held, double bytes, double chunk_bytes) {
  const CostParams params = runtime_cost(topology, chunk_bytes);
  bool critical_path = false;
  // Only all-reduce's rows are priced by their critical path; the other collectives' race prices
  // every row with the evaluator, whatever all-reduce row shares its name ("switch-tree").
  if (held.collective == ir::Collective::AllReduce) {
    try {
      critical_path = find_algorithm(held.algorithm).row->critical_path;
    } catch (const std::exception&) {
      // (A schedule no row builds: the evaluator prices it.)
    }
  }
  const ScheduleCost cost =
      critical_path ? critical_path_cost(topology, held, params) : evaluate_schedule(topology, held, params);
  return cost.at(bytes);
}

const ir::Schedule* serving(const ir::Plan& plan, ir::Collective collective, int32_t root, uint64_t bytes) {
  for (const ir::Schedule& s : plan.schedules) {
    if (s.collective != collective || (ir::has_root(collective) && s.root != root)) continue;
    if (bytes >= s.min_bytes && (!s.max_bytes || bytes < *s.max_bytes)) return &s;
  }
  return nullptr;
}
}  // namespace

double NetworkWatch::predicted_gain(const ir::Plan& current, const ir::Plan& fresh) const {
  const Topology* figures = candidate_ ? candidate_.get() : topology_.get();
  if (!figures) return 0;
  double before = 0, after = 0;
  try {
    for (size_t s = 0; s < records_.size() && s < current.schedules.size(); ++s) {
      const ir::Schedule& old_schedule = current.schedules[s];
      for (const auto& [bytes, calls] : records_[s].total.sizes) {
        const ir::Schedule* now = serving(fresh, old_schedule.collective, old_schedule.root, bytes);
        if (!now) continue;
        const double n = static_cast<double>(calls), b = static_cast<double>(bytes);
        before += n * predicted_call_seconds(*figures, old_schedule, b, chunk_bytes_);
        after += n * predicted_call_seconds(*figures, *now, b, chunk_bytes_);
      }
    }
  } catch (const std::exception&) {
    return 1;  // (a schedule the evaluator cannot price: no reason to hold back)
  }
  return before > 0 ? 1 - after / before : 1;
}

bool NetworkWatch::at_file_rates(const Topology* topology) const {
  if (!topology || !file_topology_) return false;
  for (int32_t n = 0; n < file_topology_->num_nodes(); ++n) {
    if (n == file_topology_->root()) continue;
    if (topology->uplink(n).bandwidth != file_topology_->uplink(n).bandwidth) return false;
  }
  return true;
}

namespace {
// Each node's uplink bandwidth, by node (the root's 0; empty without a topology).
std::vector<double> uplink_rates(const Topology* topology) {
  std::vector<double> out;
  if (!topology) return out;
  out.assign(static_cast<size_t>(topology->num_nodes()), 0.0);
  for (int32_t n = 0; n < topology->num_nodes(); ++n)
    if (n != topology->root()) out[static_cast<size_t>(n)] = topology->uplink(n).bandwidth;
  return out;
}
}  // namespace

std::vector<double> NetworkWatch::uplink_bandwidths() const { return uplink_rates(topology_.get()); }

std::vector<double> NetworkWatch::file_uplink_bandwidths() const { return uplink_rates(file_topology_.get()); }

void NetworkWatch::adopt(const ir::Plan& plan) {
  for (size_t s = 0; s < records_.size(); ++s) {
    if (records_[s].total.calls > 0) retired_.push_back(stats_of(plan_->schedules[s], records_[s]));
  }
  records_.assign(plan.schedules.size(), Record{});
  if (candidate_) topology_ = std::move(candidate_);
  ++generation_;
}

ScheduleStats NetworkWatch::stats_of(const ir::Schedule& schedule, const Record& record) const {
  ScheduleStats out;
  out.algorithm = schedule.algorithm;
  out.collective = schedule.collective;
  out.root = schedule.root;
  out.min_bytes = schedule.min_bytes;
  out.max_bytes = schedule.max_bytes;
  out.plan_generation = generation_;
  out.calls = record.total.calls;
  out.measured = record.total.seconds;
  out.predicted = predicted_call(record, record.total);
  out.steps.resize(record.total.steps.size());
  for (size_t k = 0; k < out.steps.size(); ++k) {
    out.steps[k].level = step_level(schedule, k);
    out.steps[k].measured = record.total.steps[k];
    out.steps[k].predicted = predicted(record, record.total, k);
  }
  return out;
}

CommStats NetworkWatch::stats() const {
  CommStats out;
  out.rank = rank_;
  out.timed = timed_;
  out.plan_generation = generation_;
  out.schedules = retired_;
  for (size_t s = 0; s < records_.size(); ++s) {
    if (records_[s].total.calls == 0) continue;
    const_cast<NetworkWatch*>(this)->price(s);
    out.schedules.push_back(stats_of(plan_->schedules[s], records_[s]));
  }
  out.events = events_;
  return out;
}

// --- the report -------------------------------------------------------------------------------

std::string format_stats(const CommStats& stats) {
  std::string text;
  if (!stats.timed) text += "calls are not timed (FLEXPLAN_STATS=1 or FLEXPLAN_REPLAN=detect|auto times them)\n";
  for (const ScheduleStats& s : stats.schedules) {
    const double calls = static_cast<double>(std::max<uint64_t>(s.calls, 1));
    text += fmt::format("{} {}{} [{}, {}){}: {} calls, {:.1f} us/call measured", ir::to_string(s.collective),
                        s.algorithm, ir::has_root(s.collective) ? fmt::format(" root {}", s.root) : "",
                        format_bytes(static_cast<double>(s.min_bytes)),
                        s.max_bytes ? format_bytes(static_cast<double>(*s.max_bytes)) : "inf",
                        s.plan_generation ? fmt::format(" (plan {})", s.plan_generation) : "", s.calls,
                        1e6 * s.measured / calls);
    if (s.predicted > 0) {
      text += fmt::format(", {:.1f} us predicted ({:.2f}x)", 1e6 * s.predicted / calls, s.measured / s.predicted);
    }
    // Where the time goes: the step of the largest share.
    size_t worst = 0;
    double steps_total = 0;
    for (size_t k = 0; k < s.steps.size(); ++k) {
      steps_total += s.steps[k].measured;
      if (s.steps[k].measured > s.steps[worst].measured) worst = k;
    }
    if (steps_total > 0) {
      // The level whose steps take the most, then the single step (a pipeline spreads a level
      // over many steps).
      std::map<int32_t, std::pair<double, double>> by_level;  // level -> (measured, predicted)
      for (const StepStats& step : s.steps) {
        by_level[step.level].first += step.measured;
        by_level[step.level].second += std::max(step.predicted, 0.0);
      }
      const auto top = std::max_element(by_level.begin(), by_level.end(), [](const auto& a, const auto& b) {
        return a.second.first < b.second.first;
      });
      text += fmt::format("; most time: level {} {:.0f}%", top->first, 100 * top->second.first / steps_total);
      if (top->second.second > 0) text += fmt::format(" ({:.2f}x its prediction)", top->second.first / top->second.second);
      const StepStats& w = s.steps[worst];
      text += fmt::format(", step {} (level {}) {:.0f}%", worst, w.level, 100 * w.measured / steps_total);
      if (w.predicted > 0) text += fmt::format(", {:.2f}x its prediction", w.measured / w.predicted);
    }
    text += '\n';
  }
  for (const std::string& event : stats.events) text += event + '\n';
  return text;
}

}  // namespace flexplan
