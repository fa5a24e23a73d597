// Analysis of one sweep point (analysis.hpp).
#include "whatif/analysis.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <utility>

#include "planner/floor.hpp"
#include "planner/plan_builder.hpp"

namespace flexplan::whatif {
namespace {

struct Best {
  const AlgorithmPrice* price = nullptr;
  double time = std::numeric_limits<double>::infinity();
};

// Ties go to the earlier algorithm, as the planner's envelope does.
Best cheapest(const std::vector<AlgorithmPrice>& prices, double bytes) {
  Best best;
  for (const auto& p : prices) {
    const double t = p.cost.at(bytes);
    if (t < best.time * (1 - 1e-9)) best = {&p, t};
  }
  return best;
}

// What an upgrade is judged by: the step time with a workload, else the all-reduce time at the
// reference size.
double objective(const std::vector<AlgorithmPrice>& prices, const AnalysisOptions& options,
                 int learners, uint64_t reference) {
  if (options.workload)
    return predict_step(*options.workload, learners,
                        [&](double bytes) { return cheapest(prices, bytes).time; })
        .step;
  return cheapest(prices, static_cast<double>(reference)).time;
}

// The uplinks of `nodes` with doubled bandwidth.
std::vector<Topology::UplinkChange> doubled(const Topology& topo, const std::vector<NodeId>& nodes) {
  std::vector<Topology::UplinkChange> changes;
  changes.reserve(nodes.size());
  for (NodeId n : nodes) changes.push_back({n, {2 * topo.uplink(n).bandwidth, topo.uplink(n).latency}});
  return changes;
}

// Takes a change to the topology back when it goes out of scope.
class UndoOnExit {
 public:
  UndoOnExit(Topology& topo, Topology::UplinkUndo undo) : topo_(topo), undo_(std::move(undo)) {}
  UndoOnExit(const UndoOnExit&) = delete;
  UndoOnExit& operator=(const UndoOnExit&) = delete;
  ~UndoOnExit() { topo_.undo(undo_); }

 private:
  Topology& topo_;
  Topology::UplinkUndo undo_;
};

bool is_machine(const Topology& topo, NodeId n) {
  if (topo.is_learner(n)) return false;
  for (NodeId c : topo.children(n))
    if (!topo.is_learner(c)) return false;
  return true;
}

void collect_below(const Topology& topo, NodeId n, std::vector<NodeId>& out) {
  for (NodeId c : topo.children(n)) {
    out.push_back(c);
    collect_below(topo, c, out);
  }
}

struct Candidate {
  std::string target;
  std::vector<NodeId> nodes;
};

// The single busiest links, then the classes a designer buys as one: every machine uplink,
// every learner uplink, and per top-level group its uplink and everything below it.
std::vector<Candidate> upgrade_candidates(const Topology& topo, const std::vector<NodeId>& busiest) {
  std::vector<Candidate> candidates;
  for (NodeId n : busiest) candidates.push_back({"link:" + topo.full_name(n), {n}});
  Candidate machines{"machines", {}}, learners{"learners", {}};
  for (NodeId n = 1; n < topo.num_nodes(); ++n) {
    if (is_machine(topo, n)) machines.nodes.push_back(n);
    if (topo.is_learner(n)) learners.nodes.push_back(n);
  }
  candidates.push_back(std::move(machines));
  candidates.push_back(std::move(learners));
  size_t groups = 0;
  for (NodeId c : topo.children(topo.root())) {
    if (topo.is_learner(c) || is_machine(topo, c) || ++groups > 16) continue;
    candidates.push_back({"link:" + topo.full_name(c), {c}});  // the group's own uplink
    Candidate under{"under:" + topo.full_name(c), {}};
    collect_below(topo, c, under.nodes);
    candidates.push_back(std::move(under));
  }
  // Drop empty classes and repeats of the same set of links.
  std::vector<Candidate> unique;
  for (auto& c : candidates) {
    std::sort(c.nodes.begin(), c.nodes.end());
    if (c.nodes.empty()) continue;
    const bool repeat = std::any_of(unique.begin(), unique.end(),
                                    [&](const Candidate& u) { return u.nodes == c.nodes; });
    if (!repeat) unique.push_back(std::move(c));
  }
  return unique;
}

}  // namespace

PointResult analyse_point(Topology& topo, Pricer& pricer, const AnalysisOptions& options) {
  PointResult result;
  result.learners = topo.num_learners();
  result.topology_hash = topo.hash_hex();
  const auto prices = pricer.price(topo);
  if (prices.empty()) throw std::runtime_error("no algorithm could be priced on this topology");

  std::vector<PriceCurve> curves;
  for (const auto& p : prices) curves.push_back([&p](double n) { return p.cost.at(n); });
  for (const auto& piece : cheapest_pieces(curves))
    result.ranges.push_back({prices[piece.curve].algorithm, piece.min_bytes, piece.max_bytes});

  const CostFloor floor = cost_floor(topo);
  const ScheduleCost ring = ring_cost(topo, pricer.cost_params());
  for (uint64_t bytes : options.sizes) {
    const double n = static_cast<double>(bytes);
    const Best best = cheapest(prices, n);
    SizeResult s;
    s.bytes = bytes;
    s.algorithm = best.price->algorithm;
    s.time = best.time;
    s.busbw = bus_bandwidth(n, s.time, result.learners);
    s.ring_time = ring.at(n);
    s.ring_busbw = bus_bandwidth(n, s.ring_time, result.learners);
    s.saving = s.ring_time > 0 ? 1 - s.time / s.ring_time : 0;
    s.floor_ratio = floor.at(n) > 0 ? s.time / floor.at(n) : 0;
    for (const auto& p : prices) s.by_algorithm.emplace_back(p.algorithm, p.cost.at(n));
    result.sizes.push_back(std::move(s));
  }

  result.reference_bytes = options.reference_bytes;
  if (result.reference_bytes == 0 && !options.sizes.empty())
    result.reference_bytes = *std::max_element(options.sizes.begin(), options.sizes.end());
  const double reference = static_cast<double>(result.reference_bytes);
  const Best at_reference = cheapest(prices, reference);
  result.reference_algorithm = at_reference.price->algorithm;

  if (options.workload)
    result.step = predict_step(*options.workload, result.learners,
                               [&](double bytes) { return cheapest(prices, bytes).time; });

  // Link loads of the algorithm chosen at the reference size.
  std::vector<LinkLoad> loads;
  if (result.learners > 1 && at_reference.time > 0) {
    const LinkTraffic traffic = pricer.traffic(topo, result.reference_algorithm);
    for (NodeId n = 1; n < topo.num_nodes(); ++n) {
      // One entry per link, for its busier direction: both directions carry the same bytes in
      // most all-reduces, and listing the link twice would hide the next one.
      const double bandwidth = topo.uplink(n).bandwidth;
      const double up = traffic.up[n] * reference, down = traffic.down[n] * reference;
      const double bytes = std::max(up, down);
      if (bytes <= 0) continue;
      const char* direction = std::abs(up - down) <= 1e-9 * bytes ? "both" : up > down ? "up" : "down";
      loads.push_back({topo.full_name(n), direction, bandwidth, bytes,
                       bytes / bandwidth / at_reference.time});
    }
  }
  std::stable_sort(loads.begin(), loads.end(),
                   [](const LinkLoad& a, const LinkLoad& b) { return a.utilization > b.utilization; });

  if (options.advise && result.learners > 1) {
    std::vector<NodeId> busiest;
    std::vector<std::string> seen;
    for (const auto& load : loads) {
      if (busiest.size() >= options.single_link_candidates) break;
      if (std::find(seen.begin(), seen.end(), load.link) != seen.end()) continue;
      seen.push_back(load.link);
      for (NodeId n = 1; n < topo.num_nodes(); ++n)
        if (topo.full_name(n) == load.link) busiest.push_back(n);
    }
    const double before = objective(prices, options, result.learners, result.reference_bytes);
    // Each candidate doubles its links in place and takes that back: building a Topology per
    // candidate cost most of a sweep's time.
    for (const auto& candidate : upgrade_candidates(topo, busiest)) {
      const UndoOnExit upgraded(topo, topo.set_uplinks(doubled(topo, candidate.nodes)));
      const double after =
          objective(pricer.price(topo), options, result.learners, result.reference_bytes);
      result.upgrades.push_back({candidate.target, candidate.nodes.size(), before, after});
    }
    std::stable_sort(result.upgrades.begin(), result.upgrades.end(),
                     [](const Upgrade& a, const Upgrade& b) { return a.after < b.after; });
    // Advice names the smallest purchase among those buying at least 99% of the best saving:
    // one link rather than a class holding it, when the class buys no more.
    if (!result.upgrades.empty() && result.upgrades.front().after < before) {
      const double best = result.upgrades.front().after;
      auto pick = result.upgrades.begin();
      for (auto it = result.upgrades.begin();
           it != result.upgrades.end() && it->after <= best + 0.01 * (before - best); ++it)
        if (it->links < pick->links) pick = it;
      std::rotate(result.upgrades.begin(), pick, pick + 1);
    }
  }
  if (loads.size() > options.bottleneck_count) loads.resize(options.bottleneck_count);
  result.bottlenecks = std::move(loads);
  return result;
}

PointResult analyse_point(const Topology& topo, Pricer& pricer, const AnalysisOptions& options) {
  Topology copy = topo;
  return analyse_point(copy, pricer, options);
}

}  // namespace flexplan::whatif
