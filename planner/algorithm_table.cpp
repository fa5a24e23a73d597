// The algorithm table (algorithm_table.hpp): one row per algorithm, and the size estimates and
// closed-form wrappers the rows point to.
#include "planner/algorithm_table.hpp"

#include "ir/pipeline_form.hpp"
#include "planner/bandwidth_shares.hpp"

#include <charconv>
#include <deque>
#include <mutex>
#include <stdexcept>

#include <fmt/core.h>
#include <fmt/format.h>

#include "planner/latency_trees.hpp"
#include "planner/switch_tree.hpp"
#include "planner/machines.hpp"
#include "planner/pipeline.hpp"

namespace flexplan {
namespace {

uint64_t sat_mul(uint64_t a, uint64_t b) {
  unsigned __int128 p = static_cast<unsigned __int128>(a) * b;
  return p > ~uint64_t{0} ? ~uint64_t{0} : static_cast<uint64_t>(p);
}

// A ring reduce-scatter + all-gather among `members`, `rings` of them in parallel.
ScheduleSize ring_size(uint64_t members, uint64_t rings) {
  if (members < 2) return {};
  const uint64_t ops = sat_mul(sat_mul(2 * (members - 1), members), rings);
  return {ops, sat_mul(ops, 2)};
}

// --- flexreduce ---------------------------------------------------------------------------

ScheduleSize flexreduce_size(const Topology& topo) {
  // At node x every subrange starts at a new-range or a holder boundary: at most twice the
  // learners under x subranges, each with degree(x) members; doubled for the all-gather.
  ScheduleSize size;
  for (NodeId x = 0; x < topo.num_nodes(); ++x) {
    if (topo.is_learner(x)) continue;
    const uint64_t subranges = 2 * topo.learners_under(x).size();
    size.ops += 2 * subranges;
    size.group_members = std::min<uint64_t>(
        size.group_members + sat_mul(2 * subranges, topo.degree(x)), ~uint64_t{0} >> 1);
  }
  return size;
}

// --- chain-bw -----------------------------------------------------------------------------

// At most two ranges per learner arc, each a reduce and a broadcast through every learner.
ScheduleSize chain_bw_size(const Topology& topo) {
  const uint64_t learners = topo.num_learners();
  if (learners < 2) return {};
  const uint64_t ops = 4 * learners;
  return {ops, sat_mul(ops, learners)};
}

// --- ring ---------------------------------------------------------------------------------

ScheduleSize ring_schedule_size(const Topology& topo) { return ring_size(topo.num_learners(), 1); }

std::optional<ScheduleCost> ring_closed_form(const Topology& topo, const CostParams& params) {
  return ring_cost(topo, params);
}

// --- blueconnect --------------------------------------------------------------------------

ScheduleSize blueconnect_size(const Topology& topo) {
  if (blueconnect_falls_back(topo)) return ring_size(topo.num_learners(), 1);
  ScheduleSize size;
  const uint64_t learners = topo.num_learners();
  for (int level = 0; level < topo.num_levels(); ++level) {
    const uint64_t fan_out = topo.degree(topo.nodes_at_level(level).front());
    const auto rings = ring_size(fan_out, learners / fan_out);
    size.ops += rings.ops;
    size.group_members += rings.group_members;
  }
  return size;
}

std::optional<ScheduleCost> blueconnect_closed_form(const Topology& topo,
                                                    const CostParams& params) {
  if (blueconnect_falls_back(topo)) return ring_cost(topo, params);
  return std::nullopt;  // Eq. 3 is exact only on symmetric links: build and evaluate
}

std::string blueconnect_note(const Topology& topo) {
  return blueconnect_falls_back(topo) ? "fell back to the ring: the tree is not symmetric" : "";
}

// --- hierarchical -------------------------------------------------------------------------

// The leader ring, plus a local reduce and a local broadcast per machine of several learners.
ScheduleSize hierarchical_size(const Topology& topo) {
  const auto machines = machines_of(topo);
  ScheduleSize size = ring_size(machines.size(), 1);
  for (const Machine& machine : machines) {
    if (machine.learners.size() < 2) continue;
    size.ops += 2;
    size.group_members += 2 * machine.learners.size();
  }
  return size;
}

std::optional<ScheduleCost> hierarchical_closed_form(const Topology& topo,
                                                     const CostParams& params) {
  return hierarchical_cost(topo, params);
}

double blueconnect_eq3(const Topology& topo, double bytes, const CostParams& params) {
  return topo.is_symmetric() ? blueconnect_cost(topo, params).at(bytes) : -1;
}

// --- latency algorithms -------------------------------------------------------------------

uint64_t log2_floor(uint64_t n) {
  uint64_t k = 0;
  while ((uint64_t{2} << k) <= n) ++k;
  return k;
}

// Ops of recursive doubling among n ranks: the pairwise rounds of the largest power of two,
// those of the rest among themselves, and one more round for both.
uint64_t recursive_doubling_ops(uint64_t n) {
  if (n < 2) return 0;
  const uint64_t m = log2_floor(n), main = uint64_t{1} << m, extra = n - main;
  return m * main + (extra ? recursive_doubling_ops(extra) + main + extra : 0);
}

ScheduleSize recursive_doubling_size(const Topology& topo) {
  const uint64_t ops = recursive_doubling_ops(topo.num_learners());
  return {ops, 2 * ops};
}

ScheduleSize rabenseifner_size(const Topology& topo) {
  const uint64_t p = topo.num_learners();
  if (p < 2) return {};
  const uint64_t m = log2_floor(p), main = uint64_t{1} << m;
  const uint64_t ops = 2 * m * main + 2 * (p - main);
  return {ops, 2 * ops};
}

ScheduleSize binomial_tree_size(const Topology& topo) {
  const uint64_t ops = 2 * (static_cast<uint64_t>(topo.num_learners()) - 1);
  return {ops, 2 * ops};
}

ScheduleSize rd_leader_size(const Topology& topo) {
  const auto machines = machines_of(topo);
  const uint64_t rd = recursive_doubling_ops(machines.size());
  ScheduleSize size{rd, 2 * rd};
  for (const Machine& machine : machines) {
    if (machine.learners.size() < 2) continue;
    size.ops += 2;
    size.group_members += 2 * machine.learners.size();
  }
  return size;
}

std::string flexreduce_bw_unsuitable(const Topology& topo) {
  const uint64_t columns = tree_lp_columns(topo);
  if (columns <= kMaxTreeLpColumns) return {};
  return fmt::format("its share LP would have {} columns (limit {}: identical machines and racks "
                     "share columns, this tree has too few alike)",
                     columns, kMaxTreeLpColumns);
}

ScheduleSize torus_2d_size(const Topology& topo) {
  const auto machines = machines_of(topo);
  const uint64_t k = machines.front().learners.size(), m = machines.size();
  const auto local = ring_size(k, m), across = ring_size(m, k);
  return {local.ops + across.ops, local.group_members + across.group_members};
}

ScheduleSize leader_direct_size(const Topology& topo) { return latency_tree_size(topo, true, 0); }
ScheduleSize centre_tree_size(const Topology& topo) { return latency_tree_size(topo, false, 1); }
ScheduleSize double_tree_size(const Topology& topo) { return latency_tree_size(topo, false, 2); }
ir::Schedule plan_switch_star_tree(const Topology& topo) { return plan_switch_tree(topo, SwitchTreeShape{}); }
ir::Schedule plan_switch_double_tree(const Topology& topo) { return plan_switch_tree(topo, SwitchTreeShape{0, 2}); }
ir::Schedule plan_switch_exchange(const Topology& topo) { return plan_switch_tree(topo, SwitchTreeShape{0, 1, true}); }
ir::Schedule plan_switch_double_exchange(const Topology& topo) { return plan_switch_tree(topo, SwitchTreeShape{0, 2, true}); }
ir::Schedule plan_switch_chain_tree(const Topology& topo) { return plan_switch_tree(topo, SwitchTreeShape{1, 1}); }
ir::Schedule plan_switch_binary_tree(const Topology& topo) { return plan_switch_tree(topo, SwitchTreeShape{2, 1}); }
ir::Schedule plan_switch_double_binary_tree(const Topology& topo) { return plan_switch_tree(topo, SwitchTreeShape{2, 2}); }
ir::Schedule plan_switch_lifted_binary(const Topology& topo) {
  return plan_switch_tree(topo, SwitchTreeShape{.fanout = 2, .lift_narrow = true});
}
ir::Schedule plan_switch_lifted_double(const Topology& topo) {
  return plan_switch_tree(topo, SwitchTreeShape{.fanout = 2, .trees = 2, .lift_narrow = true});
}
ir::Schedule plan_switch_triple_tree(const Topology& topo) {
  return plan_switch_tree(topo, SwitchTreeShape{.trees = 3, .rotate_sides = true});
}
ir::Schedule plan_switch_fit_tree(const Topology& topo) {
  return plan_switch_tree(topo, SwitchTreeShape{.fit_fanout = true});
}
ir::Schedule plan_switch_fit_triple(const Topology& topo) {
  return plan_switch_tree(topo, SwitchTreeShape{.trees = 3, .rotate_sides = true, .fit_fanout = true});
}
ScheduleSize switch_tree_three(const Topology& topo) { return switch_tree_size(topo, 3, false); }
ScheduleSize switch_tree_one(const Topology& topo) { return switch_tree_size(topo, 1, false); }
ScheduleSize switch_tree_two(const Topology& topo) { return switch_tree_size(topo, 2, false); }
ScheduleSize switch_exchange_one(const Topology& topo) { return switch_tree_size(topo, 1, true); }
ScheduleSize switch_exchange_two(const Topology& topo) { return switch_tree_size(topo, 2, true); }

const AlgorithmRow kTable[] = {
    {.name = "flexreduce",
     .summary = "FlexReduce as the paper: uneven shares by learner counts, level by level",
     .build = plan_flexreduce,
     .estimate = flexreduce_size,
     .pipelines = true,
     .model = flexreduce_time,
     .model_name = "Eq. 6",
     .reports_reduce_calls = true},
    {.name = "flexreduce-bw",
     .summary = "FlexReduce with shares by link bandwidth (an LP), star reduces level by level",
     .build = plan_flexreduce_bw,
     .build_for_cost = plan_flexreduce_bw,
     .estimate = nullptr,  // its size follows from the LP: built once, sliced for the variants
     .unsuitable = flexreduce_bw_unsuitable,
     .pipelines = true},
    {.name = "chain-bw",
     .summary = "shares by link bandwidth, one tree-walking chain per range, all levels at once",
     .build = plan_chain_bw,
     .estimate = chain_bw_size},
    {.name = "ring",
     .summary = "ring reduce-scatter + all-gather over all learners in depth-first order",
     .build = plan_ring,
     .estimate = ring_schedule_size,
     .closed_form = ring_closed_form},
    {.name = "blueconnect",
     .summary = "level-by-level rings on a symmetric tree (else the ring)",
     .build = plan_blueconnect,
     .estimate = blueconnect_size,
     .closed_form = blueconnect_closed_form,
     .note = blueconnect_note,
     .model = blueconnect_eq3,
     .model_name = "Eq. 3"},
    {.name = "hierarchical",
     .summary = "reduce to a leader per machine, ring among leaders, broadcast from it",
     .build = plan_hierarchical,
     .estimate = hierarchical_size,
     .closed_form = hierarchical_closed_form,
     .pipelines = true},
    {.name = "recursive-doubling",
     .summary = "pairwise exchanges at distance 1, 2, 4, ... in depth-first order, ceil(log2 P) rounds",
     .build = plan_recursive_doubling,
     .estimate = recursive_doubling_size,
     .pipelines = true,
     .max_slices = 16},
    {.name = "rabenseifner",
     .summary = "recursive halving of the vector, then recursive doubling back",
     .build = plan_rabenseifner,
     .estimate = rabenseifner_size,
     .pipelines = true,
     .max_slices = 16},
    {.name = "binomial-tree",
     .summary = "binomial reduce to one learner and broadcast back; pipelined: binomial-tree@S",
     .build = plan_binomial_tree,
     .estimate = binomial_tree_size,
     .pipelines = true,
     .max_slices = 64},
    {.name = "rd-leader",
     .summary = "star reduce to a leader per machine, recursive doubling among leaders, broadcast",
     .build = plan_rd_leader,
     .estimate = rd_leader_size,
     .pipelines = true,
     .max_slices = 16},
    {.name = "direct",
     .summary = "one step: every learner reduces all learners' data itself (tiny messages)",
     .build = plan_direct,
     .estimate = direct_size,
     .unsuitable = direct_unsuitable,
     .critical_path = true},
    {.name = "leader-direct",
     .summary = "star reduce to a leader per machine, every leader reduces all leaders, broadcast",
     .build = plan_leader_direct,
     .estimate = leader_direct_size,
     .unsuitable = leader_direct_unsuitable,
     .pipelines = true,
     .max_slices = 16,
     .critical_path = true},
    {.name = "centre-tree",
     .summary = "machines' leaders in a binary tree rooted at the centre: reduce up, broadcast down",
     .build = plan_centre_tree,
     .estimate = centre_tree_size,
     .pipelines = true,
     .max_slices = 64,
     .critical_path = true},
    {.name = "double-tree",
     .summary = "two complementary centre trees of the leaders, each on half the data",
     .build = plan_double_tree,
     .estimate = double_tree_size,
     .pipelines = true,
     .max_slices = 64,
     .critical_path = true},
    {.name = "switch-tree",
     .summary = "a tree following the switches, rooted at the centre: a star per switch, reduce up, broadcast down",
     .build = plan_switch_star_tree,
     .estimate = switch_tree_one,
     .unsuitable = switch_tree_unsuitable,
     .pipelines = true,
     .max_slices = 64,
     .critical_path = true},
    {.name = "switch-double-tree",
     .summary = "two switch trees on half the data each, the second rooted at each switch's second-cheapest member",
     .build = plan_switch_double_tree,
     .estimate = switch_tree_two,
     .unsuitable = switch_tree_unsuitable,
     .pipelines = true,
     .max_slices = 64,
     .critical_path = true},
    {.name = "switch-exchange",
     .summary = "the switch tree, but the subtrees meeting at the centre exchange directly (each reduces all) instead of through one root",
     .build = plan_switch_exchange,
     .estimate = switch_exchange_one,
     .unsuitable = switch_tree_unsuitable,
     .pipelines = true,
     .max_slices = 64,
     .critical_path = true},
    {.name = "switch-double-exch",
     .summary = "the switch double tree with the centre's exchange",
     .build = plan_switch_double_exchange,
     .estimate = switch_exchange_two,
     .unsuitable = switch_tree_unsuitable,
     .pipelines = true,
     .max_slices = 64,
     .critical_path = true},
    {.name = "switch-binary-tree",
     .summary = "the switch tree with the members meeting at each switch in a binary tree instead of one star",
     .build = plan_switch_binary_tree,
     .estimate = switch_tree_one,
     .unsuitable = switch_tree_unsuitable,
     .pipelines = true,
     .max_slices = 64,
     .critical_path = true},
    {.name = "switch-double-binary",
     .summary = "two switch binary trees on half the data each, the second rooted at each switch's second-cheapest member",
     .build = plan_switch_double_binary_tree,
     .estimate = switch_tree_two,
     .unsuitable = switch_tree_unsuitable,
     .pipelines = true,
     .max_slices = 64,
     .critical_path = true},
    {.name = "switch-chain-tree",
     .summary = "the switch tree with the members meeting at each switch in a chain instead of one star",
     .build = plan_switch_chain_tree,
     .estimate = switch_tree_one,
     .unsuitable = switch_tree_unsuitable,
     .pipelines = true,
     .max_slices = 64,
     .critical_path = true},
    {.name = "switch-lift-binary",
     .summary = "switch-binary-tree, with members that all sit behind links narrower than their switch's way up meeting one level up",
     .build = plan_switch_lifted_binary,
     .estimate = switch_tree_one,
     .unsuitable = switch_tree_unsuitable,
     .pipelines = true,
     .max_slices = 64,
     .critical_path = true},
    {.name = "switch-lift-double",
     .summary = "switch-double-binary, lifted as switch-lift-binary",
     .build = plan_switch_lifted_double,
     .estimate = switch_tree_two,
     .unsuitable = switch_tree_unsuitable,
     .pipelines = true,
     .max_slices = 64,
     .critical_path = true},
    {.name = "switch-triple-tree",
     .summary = "three switch trees on a third of the data each, rooted in turn at each switch's cheapest members and its way up (members meeting a level higher)",
     .build = plan_switch_triple_tree,
     .estimate = switch_tree_three,
     .unsuitable = switch_triple_tree_unsuitable,
     .pipelines = true,
     .max_slices = 64,
     .critical_path = true},
    {.name = "switch-fit-tree",
     .summary = "the switch tree with the members meeting at each switch in a tree fitted to their links: the widest take the most",
     .build = plan_switch_fit_tree,
     .estimate = switch_tree_one,
     .unsuitable = switch_tree_unsuitable,
     .pipelines = true,
     .max_slices = 64,
     .critical_path = true},
    {.name = "switch-fit-triple",
     .summary = "switch-triple-tree with the members meeting in trees fitted to their links",
     .build = plan_switch_fit_triple,
     .estimate = switch_tree_three,
     .unsuitable = switch_triple_tree_unsuitable,
     .pipelines = true,
     .max_slices = 64,
     .critical_path = true},
    {.name = "torus-2d",
     .summary = "grid clusters: rings inside machines, rings across them per local index",
     .build = plan_torus_2d,
     .estimate = torus_2d_size,
     .unsuitable = torus_2d_unsuitable,
     .pipelines = true,
     .max_slices = 16},
};

[[noreturn]] void unknown_algorithm(std::string_view name) {
  throw std::invalid_argument(fmt::format(
      "unknown algorithm '{}' (known: {}; a pipelined variant adds @slices, as flexreduce@4)",
      name, fmt::join(algorithm_names(), ", ")));
}

}  // namespace

ScheduleSize measured_size(const ir::Schedule& schedule) {
  ScheduleSize size;
  for (const auto& step : schedule.steps) {
    size.ops += step.ops.size();
    for (const auto& op : step.ops) size.group_members += op.group.size();
  }
  // A compact pipeline's expansion repeats its base once per slice.
  return ScheduleSize{sat_mul(size.ops, schedule.slices), sat_mul(size.group_members, schedule.slices)};
}

ScheduleBeyondLimits::ScheduleBeyondLimits(const std::string& algorithm, ScheduleSize built)
    : std::length_error(fmt::format("{}: its schedule passed the limits while being built ({} ops and "
                                    "{} group members when it stopped; limits {} and {})",
                                    algorithm, built.ops, built.group_members, kMaxScheduleOps,
                                    kMaxScheduleGroupMembers)),
      size(built) {}

bool schedule_fits_limits(const ScheduleSize& size) {
  return size.ops <= kMaxScheduleOps && size.group_members <= kMaxScheduleGroupMembers;
}

std::span<const AlgorithmRow> algorithm_table() { return kTable; }

const AlgorithmRow& kept_row(const AlgorithmRow& original, size_t nth) {
  if (original.kept_from != nullptr) return kept_row(*original.kept_from, nth);
  // Made on first use, kept until the program exits: candidates and reports point at them.
  static std::mutex mutex;
  static std::deque<std::string> names;
  static std::deque<AlgorithmRow> rows;
  const std::string name = nth == 0 ? fmt::format("kept:{}", original.name)
                                    : fmt::format("kept{}:{}", nth + 1, original.name);
  std::lock_guard lock(mutex);
  for (const AlgorithmRow& row : rows)
    if (row.name == name) return row;
  const std::string& stored = names.emplace_back(name);
  return rows.emplace_back(AlgorithmRow{
      .name = stored,
      .summary = "a schedule of the plan re-planned from, raced again as it is",
      .build = nullptr,
      .estimate = nullptr,
      .pipelines = original.pipelines,
      .max_slices = original.max_slices,
      .critical_path = original.critical_path,
      .kept_from = &original});
}

std::vector<std::string> algorithm_names() {
  std::vector<std::string> names;
  for (const auto& row : kTable) names.emplace_back(row.name);
  return names;
}

std::string AlgorithmChoice::name() const {
  return slices == 1 ? std::string(row->name) : fmt::format("{}@{}", row->name, slices);
}

ir::Schedule build_base(const AlgorithmRow& row, const Topology& topo, const CostParams& params) {
  return row.build_for_cost != nullptr ? row.build_for_cost(topo, params) : row.build(topo);
}

ir::Schedule AlgorithmChoice::build(const Topology& topo, const CostParams& params) const {
  auto schedule = build_base(*row, topo, params);
  return slices == 1 ? schedule : pipeline_slices(schedule, slices);
}

ir::Schedule AlgorithmChoice::build_compact(const Topology& topo, const CostParams& params) const {
  auto schedule = build_base(*row, topo, params);
  return slices == 1 ? schedule : ir::compact_pipeline(std::move(schedule), slices);
}

ir::Schedule AlgorithmChoice::from_base(const ir::Schedule& base) const {
  return slices == 1 ? base : pipeline_slices(base, slices);
}

std::optional<ScheduleSize> AlgorithmChoice::estimate(const Topology& topo) const {
  if (row->estimate == nullptr) return std::nullopt;
  return sliced(row->estimate(topo));
}

ScheduleSize AlgorithmChoice::sliced(const ScheduleSize& base) const {
  return ScheduleSize{sat_mul(base.ops, slices), sat_mul(base.group_members, slices)};
}

std::optional<ScheduleCost> AlgorithmChoice::closed_form(const Topology& topo,
                                                         const CostParams& params) const {
  if (slices != 1 || row->closed_form == nullptr) return std::nullopt;
  return row->closed_form(topo, params);
}

SlicedName split_slices(std::string_view name) {
  const size_t at = name.find('@');
  SlicedName split{name.substr(0, at), 1};
  if (at != std::string_view::npos) {
    const std::string_view digits = name.substr(at + 1);
    const auto [end, error] =
        std::from_chars(digits.data(), digits.data() + digits.size(), split.slices);
    if (error != std::errc() || end != digits.data() + digits.size() || split.slices < 1 ||
        split.slices > 1024)
      throw std::invalid_argument(fmt::format(
          "algorithm '{}': the slice count after '@' must be a whole number from 1 to 1024", name));
  }
  return split;
}

AlgorithmChoice find_algorithm(std::string_view name) {
  const auto [base, slices] = split_slices(name);
  for (const auto& row : kTable) {
    if (row.name != base) continue;
    if (slices > 1 && !row.pipelines)
      throw std::invalid_argument(
          fmt::format("algorithm '{}' has no pipelined variant ({} gains nothing from slices)",
                      name, row.name));
    return {&row, slices};
  }
  unknown_algorithm(base);
}

ir::Schedule plan_algorithm(const Topology& topo, std::string_view name) {
  return find_algorithm(name).build(topo);
}

}  // namespace flexplan
