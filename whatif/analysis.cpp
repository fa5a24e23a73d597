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

// The plan's time for an n-byte all-reduce (the step model asks with whole byte counts).
double plan_time(const PlanPrice& price, double bytes) {
  return price.time(static_cast<uint64_t>(std::llround(std::max(bytes, 0.0))));
}

// What an upgrade is judged by: the step time with a workload, else the all-reduce time at the
// reference size; both from the plan the plan command would write.
double objective(const PlanPrice& price, const AnalysisOptions& options, int learners,
                 uint64_t reference) {
  if (options.workload)
    return predict_step(*options.workload, learners,
                        [&](double bytes) { return plan_time(price, bytes); })
        .step;
  return price.time(reference);
}

// The uplinks of `nodes` with their bandwidth multiplied by `factor`.
std::vector<Topology::UplinkChange> raised(const Topology& topo, const std::vector<NodeId>& nodes,
                                           double factor) {
  std::vector<Topology::UplinkChange> changes;
  changes.reserve(nodes.size());
  for (NodeId n : nodes)
    changes.push_back({n, {factor * topo.uplink(n).bandwidth, topo.uplink(n).latency}});
  return changes;
}

// Changes to the topology, taken back in reverse order when it goes out of scope.
class UndoStack {
 public:
  explicit UndoStack(Topology& topo) : topo_(topo) {}
  UndoStack(const UndoStack&) = delete;
  UndoStack& operator=(const UndoStack&) = delete;
  ~UndoStack() {
    while (!undos_.empty()) pop();
  }
  void push(Topology::UplinkUndo undo) { undos_.push_back(std::move(undo)); }
  void pop() {
    topo_.undo(undos_.back());
    undos_.pop_back();
  }

 private:
  Topology& topo_;
  std::vector<Topology::UplinkUndo> undos_;
};

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

// The single busiest links, the links tied as the busiest together (where one alone buys
// nothing while its twin stays as slow), then the classes a designer buys as one: every machine
// uplink, every learner uplink, and per top-level group its uplink and everything below it.
std::vector<Candidate> upgrade_candidates(const Topology& topo, const std::vector<NodeId>& busiest,
                                          const std::vector<NodeId>& tied) {
  std::vector<Candidate> candidates;
  for (NodeId n : busiest) candidates.push_back({"link:" + topo.full_name(n), {n}});
  Candidate machines{"machines", {}}, learners{"learners", {}};
  for (NodeId n = 1; n < topo.num_nodes(); ++n) {
    if (topo.is_machine(n)) machines.nodes.push_back(n);
    if (topo.is_learner(n)) learners.nodes.push_back(n);
  }
  candidates.push_back(std::move(machines));
  candidates.push_back(std::move(learners));
  size_t groups = 0;
  for (NodeId c : topo.children(topo.root())) {
    if (topo.is_learner(c) || topo.is_machine(c) || ++groups > 16) continue;
    candidates.push_back({"link:" + topo.full_name(c), {c}});  // the group's own uplink
    Candidate under{"under:" + topo.full_name(c), {}};
    collect_below(topo, c, under.nodes);
    candidates.push_back(std::move(under));
  }
  // Last, so that a class holding exactly these links keeps its name.
  if (tied.size() >= 2) {
    Candidate together{"", tied};
    for (NodeId n : tied) together.target += (together.target.empty() ? "link:" : " + link:") + topo.full_name(n);
    candidates.push_back(std::move(together));
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

// Every link's load under the schedule the plan uses at the reference size, busiest first
// (empty where its schedule is too big to walk).
std::vector<LinkLoad> link_loads(const Topology& topo, Pricer& pricer, const PlanPrice& price,
                                 uint64_t reference_bytes) {
  std::vector<LinkLoad> loads;
  const double reference = static_cast<double>(reference_bytes), time = price.time(reference_bytes);
  if (topo.num_learners() < 2 || !(time > 0)) return loads;
  LinkTraffic traffic;
  try {
    traffic = pricer.traffic(topo, price, reference_bytes);
  } catch (const std::runtime_error&) {
    return loads;
  }
  for (NodeId n = 1; n < topo.num_nodes(); ++n) {
    // One entry per link, for its busier direction: both directions carry the same bytes in
    // most all-reduces, and listing the link twice would hide the next one.
    const double bandwidth = topo.uplink(n).bandwidth;
    const double up = traffic.up[n] * reference, down = traffic.down[n] * reference;
    const double bytes = std::max(up, down);
    if (bytes <= 0) continue;
    const char* direction = std::abs(up - down) <= 1e-9 * bytes ? "both" : up > down ? "up" : "down";
    loads.push_back({topo.full_name(n), direction, bandwidth, bytes, bytes / bandwidth / time});
  }
  std::stable_sort(loads.begin(), loads.end(),
                   [](const LinkLoad& a, const LinkLoad& b) { return a.utilization > b.utilization; });
  return loads;
}

std::optional<double> candidate_cost(const Topology& topo, const std::vector<NodeId>& nodes,
                                     const UpgradeCosts* costs) {
  if (costs == nullptr) return std::nullopt;
  double total = 0;
  for (NodeId n : nodes) {
    const auto price = costs->link_price(topo, n);
    if (!price) return std::nullopt;
    total += *price;
  }
  return total;
}

// Best first: by time saved per cost where both have a price, priced before unpriced; by time
// saved otherwise; ties to fewer links.
bool better(const Upgrade& a, const Upgrade& b, bool by_cost) {
  if (by_cost && a.cost.has_value() != b.cost.has_value()) return a.cost.has_value();
  if (by_cost && a.cost && b.cost && a.saved_per_cost() != b.saved_per_cost())
    return a.saved_per_cost() > b.saved_per_cost();
  if (a.after != b.after) return a.after < b.after;
  return a.links < b.links;
}

// The candidates of one step on the tree as it stands, each raised in place and taken back,
// ranked; `loads` are link_loads of `price`, the plan before the step.
std::vector<std::pair<Upgrade, std::vector<NodeId>>> rank_candidates(
    Topology& topo, Pricer& pricer, const AnalysisOptions& options, const PlanPrice& price,
    const std::vector<LinkLoad>& loads, uint64_t reference_bytes, double before) {
  const auto node_of = [&topo](const std::string& name) {
    for (NodeId n = 1; n < topo.num_nodes(); ++n)
      if (topo.full_name(n) == name) return n;
    return NodeId{-1};
  };
  std::vector<NodeId> busiest, tied;
  for (const auto& load : loads) {
    if (busiest.size() >= options.single_link_candidates) break;
    busiest.push_back(node_of(load.link));
  }
  constexpr size_t kTiedLinks = 16;
  for (const auto& load : loads)
    if (tied.size() < kTiedLinks && load.utilization >= 0.99 * loads.front().utilization)
      tied.push_back(node_of(load.link));
  std::vector<std::pair<Upgrade, std::vector<NodeId>>> ranked;
  for (auto& candidate : upgrade_candidates(topo, busiest, tied)) {
    // In place, taken back at once: building a Topology per candidate cost most of a sweep's
    // time.
    UndoStack upgraded(topo);
    upgraded.push(topo.set_uplinks(raised(topo, candidate.nodes, options.upgrade_factor)));
    const double after = objective(pricer.price(topo, price.kept), options, topo.num_learners(), reference_bytes);
    upgraded.pop();
    Upgrade upgrade{candidate.target, candidate.nodes.size(), before, after,
                    candidate_cost(topo, candidate.nodes, options.costs)};
    ranked.emplace_back(std::move(upgrade), std::move(candidate.nodes));
  }
  const bool by_cost = options.costs != nullptr;
  std::stable_sort(ranked.begin(), ranked.end(),
                   [by_cost](const auto& a, const auto& b) { return better(a.first, b.first, by_cost); });
  return ranked;
}

// The step to take among ranked candidates: the first, or without costs the fewest links among
// those saving at least 99% of the best saving (one link rather than a class holding it, when
// the class buys no more). None where nothing saves time.
const std::pair<Upgrade, std::vector<NodeId>>* pick_step(
    const std::vector<std::pair<Upgrade, std::vector<NodeId>>>& ranked, bool by_cost) {
  if (ranked.empty() || !(ranked.front().first.saved() > 1e-12 * ranked.front().first.before))
    return nullptr;
  if (by_cost) return &ranked.front();
  const double best = ranked.front().first.saved();
  const auto* pick = &ranked.front();
  for (const auto& r : ranked)
    if (r.first.saved() >= 0.99 * best && r.first.links < pick->first.links) pick = &r;
  return pick;
}

}  // namespace

PointResult analyse_point(Topology& topo, Pricer& pricer, const AnalysisOptions& options,
                          const std::vector<KeptSchedule>& from) {
  PointResult result;
  result.learners = topo.num_learners();
  result.topology_hash = topo.hash_hex();
  const PlanPrice price = pricer.price(topo, from);
  // The kept rows that raced ("kept:switch-tree", once each however many of its slice counts).
  for (const auto& [name, cost] : price.racing) {
    if (!name.starts_with("kept")) continue;
    const std::string row = name.substr(0, name.find('@'));
    if (std::find(result.kept.begin(), result.kept.end(), row) == result.kept.end()) result.kept.push_back(row);
  }

  for (const auto& range : price.ranges)
    result.ranges.push_back({range.algorithm, range.min_bytes, range.max_bytes});

  const CostFloor floor = cost_floor(topo);
  const ScheduleCost ring = ring_cost(topo, pricer.cost_params());
  for (uint64_t bytes : options.sizes) {
    const double n = static_cast<double>(bytes);
    SizeResult s;
    s.bytes = bytes;
    s.algorithm = price.at(bytes).algorithm;
    s.time = price.time(bytes);
    s.busbw = bus_bandwidth(n, s.time, result.learners);
    s.ring_time = ring.at(n);
    s.ring_busbw = bus_bandwidth(n, s.ring_time, result.learners);
    s.saving = s.ring_time > 0 ? 1 - s.time / s.ring_time : 0;
    s.floor_ratio = floor.at(n) > 0 ? s.time / floor.at(n) : 0;
    for (const auto& [name, cost] : price.racing) s.by_algorithm.emplace_back(name, cost.at(n));
    result.sizes.push_back(std::move(s));
  }

  result.reference_bytes = options.reference_bytes;
  if (result.reference_bytes == 0 && !options.sizes.empty())
    result.reference_bytes = *std::max_element(options.sizes.begin(), options.sizes.end());
  result.reference_algorithm = price.at(result.reference_bytes).algorithm;

  if (options.workload)
    result.step = predict_step(*options.workload, result.learners,
                               [&](double bytes) { return plan_time(price, bytes); });

  // Link loads of the algorithm chosen at the reference size.
  std::vector<LinkLoad> loads = link_loads(topo, pricer, price, result.reference_bytes);

  if (options.advise && result.learners > 1) {
    const bool by_cost = options.costs != nullptr;
    const double start = objective(price, options, result.learners, result.reference_bytes);
    UndoStack applied(topo);  // the steps taken so far, on the point's tree
    double before = start;
    std::optional<double> spent = 0.0;
    PlanPrice current = price;
    for (size_t k = 0; k < std::max<size_t>(options.upgrade_steps, 1); ++k) {
      // (The first step's loads are the point's, found above.)
      const auto ranked = rank_candidates(topo, pricer, options, current,
                                          k == 0 ? loads : link_loads(topo, pricer, current, result.reference_bytes),
                                          result.reference_bytes, before);
      if (k == 0)
        for (const auto& r : ranked) result.upgrades.push_back(r.first);
      if (k >= options.upgrade_steps) break;
      const auto* pick = pick_step(ranked, by_cost);
      if (pick == nullptr) break;
      UpgradeStep step{pick->first, start > 0 ? 1 - pick->first.after / start : 0, std::nullopt};
      spent = spent && pick->first.cost ? std::optional<double>(*spent + *pick->first.cost) : std::nullopt;
      if (by_cost) step.cumulative_cost = spent;
      result.steps.push_back(std::move(step));
      applied.push(topo.set_uplinks(raised(topo, pick->second, options.upgrade_factor)));
      current = pricer.price(topo, current.kept);
      before = objective(current, options, result.learners, result.reference_bytes);
    }
  }
  if (loads.size() > options.bottleneck_count) loads.resize(options.bottleneck_count);
  result.bottlenecks = std::move(loads);
  return result;
}

PointResult analyse_point(const Topology& topo, Pricer& pricer, const AnalysisOptions& options,
                          const std::vector<KeptSchedule>& from) {
  Topology copy = topo;
  return analyse_point(copy, pricer, options, from);
}

}  // namespace flexplan::whatif
