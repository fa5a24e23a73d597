// The rows of the collectives other than all-reduce, their race, and their floors
// (collective_planner.hpp).
#include "planner/collective_planner.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <optional>
#include <stdexcept>

#include "ir/collective_contract.hpp"
#include "ir/pipeline_form.hpp"
#include "planner/collective_algorithms.hpp"
#include "planner/machines.hpp"
#include "planner/plan_builder.hpp"
#include "planner/switch_tree.hpp"

namespace flexplan {

namespace {

uint64_t ceil_log2(uint64_t n) {
  uint64_t k = 0;
  while ((uint64_t{1} << k) < n) ++k;
  return k;
}

uint64_t p_of(const Topology& topo) { return static_cast<uint64_t>(topo.num_learners()); }

// The gathers into and out of the machines' leaders cost memory in the learners times the
// largest machine's (measured on one switch of P learners: 0.37 GB at 2,500, 1.4 GB at 5,000,
// out of memory at 10,000; 1,000 machines of 1,000: out of memory at 6 GB), counted as four
// group members each so that the limits leave such rows out (one switch: from 4,000 learners).
uint64_t leader_gather_members(const Topology& topo) {
  uint64_t largest = 0;
  for (const Machine& machine : machines_of(topo)) largest = std::max<uint64_t>(largest, machine.learners.size());
  return 4 * p_of(topo) * largest;
}

// The broadcast switch trees are left out where the all-reduce's are (past 4,096 learners) and
// on one switch of learners, where they have no levels to follow: there a switch tree is one
// star, heap or chain, which the chain and binomial rows already are. On this host's 5-rank
// loopback plan (one machine, 5 ranks on 2 cores) they were chosen from 188 KiB and ran 1.2-1.8x
// slower than the rows before them at 1-4 MiB (docs/planner-quality.md).
std::string switch_broadcast_unsuitable(const Topology& t) {
  if (std::string why = switch_tree_unsuitable(t); !why.empty()) return why;
  if (machines_of(t).size() == 1) return "one switch of learners: no levels for a switch tree to follow";
  return {};
}

// The broadcast switch trees' sizes: one tree's stars going down, half the all-reduce's.
uint64_t switch_broadcast_ops(const Topology& t) { return switch_tree_size(t, 1, false).ops / 2; }
uint64_t switch_broadcast_members(const Topology& t) { return switch_tree_size(t, 1, false).group_members / 2; }

const CollectiveRow kRows[] = {
    {.name = "ring",
     .summary = "ring in depth-first order: P - 1 steps of one shard each",
     .sharded = true,
     .build = [](const Topology& t, int32_t) { return plan_ring_allgather(t); },
     .ops = [](const Topology& t) { return p_of(t) * (p_of(t) - 1); }},
    {.name = "hierarchical",
     .summary = "through a leader per machine: gather in, ring among leaders, out again",
     .sharded = true,
     .build = [](const Topology& t, int32_t) { return plan_hierarchical_allgather(t); },
     // A machine's block is one run of units when ranks follow the depth-first order; at worst
     // one op per shard in each of the ring's steps.
     .ops =
         [](const Topology& t) {
           const uint64_t m = machines_of(t).size();
           return depth_first_is_rank_order(t) ? 4 * p_of(t) + m * m * 2
                                               : 4 * p_of(t) + m * p_of(t);
         },
     .members = [](const Topology& t) { return 8 * p_of(t) + leader_gather_members(t); }},
    {.name = "tree-chains",
     .summary = "a chain per shard through the tree from its owner, ending half the order away: "
                "each link carries what the floor does",
     .sharded = true,
     .build = [](const Topology& t, int32_t) { return plan_tree_chains_allgather(t); },
     .ops = p_of,
     .members = [](const Topology& t) { return p_of(t) * p_of(t); }},
    {.name = "machine-chains",
     .summary = "tree-chains at machine grain: gather to a leader, a chain per machine's block "
                "through the leaders, scatter",
     .sharded = true,
     .build = [](const Topology& t, int32_t) { return plan_machine_chains_allgather(t); },
     .ops = [](const Topology& t) { return 6 * p_of(t); },
     .members =
         [](const Topology& t) {
           const uint64_t m = machines_of(t).size();
           return m * m + 6 * p_of(t) * 8 + leader_gather_members(t);
         }},
    {.name = "relay-stars",
     .summary = "a relay per subtree: siblings exchange blocks bottom-up, each child's relay "
                "sending its block straight to the others'; then each branch chains what its "
                "subtree lacks to its children's relays (chains as long as a fan-out)",
     .sharded = true,
     .build = [](const Topology& t, int32_t) { return plan_relay_tree_allgather(t, false, SiblingExchange::Stars); },
     .ops = [](const Topology& t) { return relay_tree_size(t).ops; },
     .members = [](const Topology& t) { return relay_tree_size(t).members; }},
    {.name = "relay-machines",
     .summary = "the relay tree with siblings exchanging around chains, and chains down that run "
                "on through each machine's learners, so that a machine takes in the outside data "
                "in one step (large messages)",
     .sharded = true,
     .build = [](const Topology& t, int32_t) { return plan_relay_tree_allgather(t, true); },
     .ops = [](const Topology& t) { return relay_tree_size(t, true).ops; },
     .members = [](const Topology& t) { return relay_tree_size(t, true).members; }},
    {.name = "bruck",
     .summary = "Bruck's exchange: ceil(log2 P) rounds at distances 1, 2, 4, ... (small messages)",
     .sharded = true,
     .build = [](const Topology& t, int32_t) { return plan_bruck_allgather(t); },
     // Ranks out of depth-first order cut a partner's shards into up to P / 2 runs each.
     .ops =
         [](const Topology& t) {
           return depth_first_is_rank_order(t) ? 2 * p_of(t) * ceil_log2(p_of(t))
                                               : p_of(t) * p_of(t);
         }},
    {.name = "chain",
     .summary = "one chain through every learner in depth-first order from the root",
     .build = plan_chain_broadcast,
     .ops = [](const Topology&) { return uint64_t{1}; }},
    {.name = "binomial-tree",
     .summary = "binomial tree from the root, ceil(log2 P) rounds; pipelined: binomial-tree@S",
     .build = plan_binomial_broadcast,
     .ops = [](const Topology& t) { return p_of(t); },
     .max_slices = 64},
    {.name = "switch-tree",
     .summary = "a tree following the switches from the root's: a star per switch from its "
                "cheapest member, level by level; pipelined: switch-tree@S",
     .build = [](const Topology& t, int32_t root) { return plan_switch_tree_broadcast(t, root); },
     .ops = switch_broadcast_ops,
     .members = switch_broadcast_members,
     .max_slices = 64,
     .unsuitable = switch_broadcast_unsuitable},
    {.name = "switch-binary-tree",
     .summary = "switch-tree with the members at each switch in a binary heap instead of one star "
                "(a member's link carries two copies out, not one per member)",
     .build = [](const Topology& t, int32_t root) { return plan_switch_tree_broadcast(t, root, 2); },
     .ops = switch_broadcast_ops,
     .members = switch_broadcast_members,
     .max_slices = 64,
     .unsuitable = switch_broadcast_unsuitable},
    {.name = "switch-chain-tree",
     .summary = "switch-tree with the members at each switch in a chain: every link carries the "
                "message once each way (large messages, pipelined)",
     .build = [](const Topology& t, int32_t root) { return plan_switch_tree_broadcast(t, root, 1); },
     .ops = switch_broadcast_ops,
     .members = switch_broadcast_members,
     .max_slices = 64,
     .unsuitable = switch_broadcast_unsuitable},
};

struct NamedChoice {
  const CollectiveRow* row;
  uint32_t slices;
};

NamedChoice find_row(ir::Collective collective, std::string_view name) {
  const auto [base, slices] = split_slices(name);
  for (const CollectiveRow& row : kRows) {
    if (row.name != base || !row.serves(collective)) continue;
    if (slices > 1 && row.max_slices == 1)
      throw std::invalid_argument(
          fmt::format("algorithm '{}' has no pipelined variant for {}", name,
                      ir::to_string(collective)));
    return {&row, slices};
  }
  throw std::invalid_argument(fmt::format("unknown {} algorithm '{}' (known: {})",
                                          ir::to_string(collective), name,
                                          fmt::join(collective_algorithm_names(collective), ", ")));
}

std::string choice_name(const NamedChoice& choice) {
  return choice.slices == 1 ? std::string(choice.row->name)
                            : fmt::format("{}@{}", choice.row->name, choice.slices);
}

// The base schedule of a row for the collective: the copying form, transposed where it combines.
ir::Schedule build_base(const Topology& topo, const CollectiveRow& row, ir::Collective collective,
                        int32_t root) {
  ir::Schedule schedule = row.build(topo, root);
  if (ir::combines(collective)) schedule = transpose_copies(schedule);
  return schedule;
}

}  // namespace

std::span<const CollectiveRow> collective_table() { return kRows; }

std::vector<std::string> collective_algorithm_names(ir::Collective collective) {
  std::vector<std::string> names;
  for (const CollectiveRow& row : kRows)
    if (row.serves(collective)) names.emplace_back(row.name);
  return names;
}

ir::Schedule plan_collective_algorithm(const Topology& topo, ir::Collective collective,
                                       std::string_view name, int32_t root) {
  if (collective == ir::Collective::AllReduce) return plan_algorithm(topo, name);
  const NamedChoice choice = find_row(collective, name);
  ir::Schedule base = build_base(topo, *choice.row, collective, root);
  return choice.slices == 1 ? base : ir::compact_pipeline(std::move(base), choice.slices);
}

void plan_collective_algorithm_name_check(ir::Collective collective, std::string_view name) {
  if (collective == ir::Collective::AllReduce)
    find_algorithm(name);
  else
    find_row(collective, name);
}

const CollectiveCandidate& CollectivePlan::chosen(uint64_t bytes) const {
  const ir::Schedule& schedule = [&]() -> const ir::Schedule& {
    for (const ir::Schedule& s : schedules)
      if (bytes >= s.min_bytes && (!s.max_bytes || bytes < *s.max_bytes)) return s;
    throw std::out_of_range(fmt::format("no {} schedule serves {} bytes",
                                        ir::to_string(collective), bytes));
  }();
  for (const CollectiveCandidate& candidate : candidates)
    if (candidate.algorithm == schedule.algorithm && candidate.left_out_because.empty())
      return candidate;
  throw std::logic_error("a chosen schedule without its candidate");
}

namespace {

using Clock = std::chrono::steady_clock;
// A candidate is named in the progress lines when building and pricing it took this long.
constexpr double kProgressSeconds = 0.05;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// The copying collective whose transpose `combining` is: all-gather for reduce-scatter,
// broadcast for reduce.
ir::Collective copying_mirror(ir::Collective combining) {
  return combining == ir::Collective::ReduceScatter ? ir::Collective::AllGather
                                                    : ir::Collective::Broadcast;
}

void check_collective_and_root(const Topology& topo, ir::Collective collective, int32_t root) {
  if (collective == ir::Collective::AllReduce)
    throw std::invalid_argument("plan_collective: all-reduce is planned by build_plan");
  if (root < 0 || root >= topo.num_learners())
    throw std::invalid_argument(fmt::format("root {} is not among the {} learners", root,
                                            topo.num_learners()));
}

// The cheapest raced candidate per size range, as the plan's schedules. `schedule_of` gives a
// candidate's schedule (built on demand for a transposed plan).
template <typename ScheduleOf>
void keep_cheapest(CollectivePlan& plan, ScheduleOf&& schedule_of) {
  std::vector<PriceCurve> curves;
  std::vector<size_t> raced;  // candidate index of each curve
  for (size_t i = 0; i < plan.candidates.size(); ++i) {
    if (!plan.candidates[i].left_out_because.empty()) continue;
    const ScheduleCost* priced = &plan.candidates[i].cost;
    curves.push_back([priced](double bytes) { return priced->at(bytes); });
    raced.push_back(i);
  }
  if (curves.empty())
    throw CollectiveBeyondLimits(fmt::format("no {} algorithm can be built for this tree ({})",
                                         ir::to_string(plan.collective),
                                         plan.candidates.front().left_out_because));
  for (const EnvelopePiece& piece : cheapest_pieces(curves)) {
    ir::Schedule schedule = schedule_of(raced[piece.curve]);
    schedule.min_bytes = piece.min_bytes;
    schedule.max_bytes = piece.max_bytes;
    plan.schedules.push_back(std::move(schedule));
  }
}

// The work of pricing a schedule of this size (kCollectivePricingWork): every member, and
// three more walks for each member of a chain beyond an op's first two.
uint64_t pricing_work(const ScheduleSize& size) {
  const uint64_t chained = size.group_members > 2 * size.ops ? size.group_members - 2 * size.ops : 0;
  return size.group_members + 3 * chained;
}

// ", 10 of 13 steps as priced before" where the memo answered for some.
std::string steps_priced_before(size_t found, size_t steps) {
  return found == 0 ? std::string() : fmt::format(", {} of {} steps as priced before", found, steps);
}

// Races the rows of a copying collective (all-gather or broadcast), keeping every raced
// candidate's schedule (a transposed plan may pick another winner where its prices differ).
CollectivePlan race_copies(const Topology& topo, ir::Collective collective, int32_t root,
                           std::span<const std::string> algorithms, const CostParams& cost,
                           const std::function<void(std::string_view)>& progress) {
  CollectivePlan plan;
  plan.collective = collective;
  plan.root = ir::has_root(collective) ? root : 0;
  plan.floor = collective_floor(topo, collective, plan.root);

  // The choices: the names asked for that this collective has, else every row and slicing.
  std::vector<NamedChoice> choices;
  for (const std::string& name : algorithms) {
    try {
      choices.push_back(find_row(collective, name));
    } catch (const std::invalid_argument&) {
      // A name of another collective's algorithm: it narrows that collective, not this one.
    }
  }
  if (choices.empty())
    for (const CollectiveRow& row : kRows) {
      if (!row.serves(collective)) continue;
      choices.push_back({&row, 1});
      for (uint32_t slices : kPipelineSlices)
        if (slices <= row.max_slices) choices.push_back({&row, slices});
    }

  // Rows of one builder share steps (relay-stars and relay-machines some of their steps down):
  // each is priced once.
  StepPriceMemo priced_steps;
  // A row's base is built once for all its slicings, which share its steps (and are then
  // verified once: ir/verify.hpp).
  std::vector<std::pair<const CollectiveRow*, ir::Schedule>> bases;
  // Each choice's size, once (a row's estimate may walk the tree), and whether any is within
  // the pricing budget: the budget leaves a row out only where another can be raced.
  std::vector<ScheduleSize> sizes;
  // Why each choice's row does not suit the tree (empty: it does), asked once a row.
  std::vector<std::string> unsuitable;
  bool any_within_budget = false;
  for (size_t c = 0; c < choices.size(); ++c) {
    const NamedChoice& choice = choices[c];
    const uint64_t row_ops = choice.row->ops(topo);
    const ScheduleSize size{row_ops * choice.slices,
                            (choice.row->members ? choice.row->members(topo) : 2 * row_ops) * choice.slices};
    sizes.push_back(size);
    if (c > 0 && choices[c - 1].row == choice.row) {
      unsuitable.push_back(unsuitable.back());
    } else {
      unsuitable.push_back(choice.row->unsuitable ? choice.row->unsuitable(topo) : std::string());
    }
    any_within_budget |= schedule_fits_limits(size) && pricing_work(size) <= kCollectivePricingWork &&
                         unsuitable.back().empty();
  }
  for (size_t c = 0; c < choices.size(); ++c) {
    const NamedChoice& choice = choices[c];
    CollectiveCandidate candidate;
    candidate.algorithm = choice_name(choice);
    const uint64_t ops = sizes[c].ops, members = sizes[c].group_members;
    if (!unsuitable[c].empty()) {
      candidate.left_out_because = unsuitable[c];
    } else if (!schedule_fits_limits(sizes[c])) {
      candidate.left_out_because =
          fmt::format("about {} ops and {} group members, beyond the {} and {} the planner builds",
                      ops, members, kMaxScheduleOps, kMaxScheduleGroupMembers);
    } else if (any_within_budget && pricing_work(sizes[c]) > kCollectivePricingWork) {
      candidate.left_out_because =
          fmt::format("about {} group members ({} pricing work), beyond the {} the race prices",
                      members, pricing_work(sizes[c]), kCollectivePricingWork);
    } else {
      auto start = Clock::now();
      auto base = std::find_if(bases.begin(), bases.end(),
                               [&](const auto& built) { return built.first == choice.row; });
      if (base == bases.end()) {
        bases.emplace_back(choice.row, choice.row->build(topo, plan.root));
        base = std::prev(bases.end());
      }
      candidate.schedule = choice.slices == 1 ? base->second
                                              : ir::compact_pipeline(base->second, choice.slices);
      const double built = seconds_since(start);
      start = Clock::now();
      const size_t found_before = priced_steps.steps_found();
      candidate.cost = evaluate_schedule(topo, candidate.schedule, cost, &priced_steps);
      candidate.cost.busy_floor = host_busy_floor(lowered_hop_count(candidate.schedule), cost);
      if (progress && built + seconds_since(start) > kProgressSeconds)
        progress(fmt::format("{} {}: built in {:.3f} s, priced in {:.3f} s{}", ir::to_string(collective),
                             candidate.algorithm, built, seconds_since(start),
                             steps_priced_before(priced_steps.steps_found() - found_before,
                                                 candidate.schedule.steps.size())));
    }
    plan.candidates.push_back(std::move(candidate));
  }
  keep_cheapest(plan, [&](size_t i) { return plan.candidates[i].schedule; });
  return plan;
}

// The plan of the combining collective transposed from its copying mirror's race: each
// candidate's price is the copies' where the transpose costs the same
// (transposes_at_same_price), else its transpose is priced; the cheapest per size range are
// transposed. Only those are built.
CollectivePlan transposed_plan(const Topology& topo, const CollectivePlan& copies, const CostParams& cost,
                               const std::function<void(std::string_view)>& progress) {
  CollectivePlan plan;
  plan.collective = copies.collective == ir::Collective::AllGather ? ir::Collective::ReduceScatter
                                                                   : ir::Collective::Reduce;
  plan.root = copies.root;
  plan.floor = collective_floor(topo, plan.collective, plan.root);
  // Transposes of one base are built once and shared by its slicings, as the copies' are.
  std::vector<std::pair<const ir::Step*, ir::Schedule>> bases;
  const auto transposed = [&](const ir::Schedule& schedule) {
    const ir::Step* key = schedule.steps.empty() ? nullptr : &schedule.steps[0];
    auto base = std::find_if(bases.begin(), bases.end(), [&](const auto& built) {
      return key != nullptr && built.first == key;
    });
    if (base == bases.end()) {
      ir::Schedule whole = schedule;
      whole.slices = 1;
      bases.emplace_back(key, transpose_copies(whole));
      base = std::prev(bases.end());
    }
    ir::Schedule out = base->second;
    out.algorithm = schedule.algorithm;
    out.slices = schedule.slices;
    out.min_bytes = schedule.min_bytes;
    out.max_bytes = schedule.max_bytes;
    return out;
  };
  std::vector<std::optional<ir::Schedule>> built(copies.candidates.size());
  StepPriceMemo priced_steps;  // transposes of shared steps are shared too
  for (size_t i = 0; i < copies.candidates.size(); ++i) {
    const CollectiveCandidate& copy = copies.candidates[i];
    CollectiveCandidate candidate;
    candidate.algorithm = copy.algorithm;
    candidate.left_out_because = copy.left_out_because;
    if (candidate.left_out_because.empty()) {
      if (transposes_at_same_price(copy.schedule, cost)) {
        candidate.cost = copy.cost;
      } else {
        auto start = Clock::now();
        built[i] = transposed(copy.schedule);
        const double transposing = seconds_since(start);
        start = Clock::now();
        const size_t found_before = priced_steps.steps_found();
        candidate.cost = evaluate_schedule(topo, *built[i], cost, &priced_steps);
        candidate.cost.busy_floor = host_busy_floor(lowered_hop_count(*built[i]), cost);  // (as many as the copies')
        if (progress && transposing + seconds_since(start) > kProgressSeconds)
          progress(fmt::format("{} {}: transposed in {:.3f} s, priced in {:.3f} s{}", ir::to_string(plan.collective),
                               candidate.algorithm, transposing, seconds_since(start),
                               steps_priced_before(priced_steps.steps_found() - found_before,
                                                   built[i]->steps.size())));
      }
    }
    plan.candidates.push_back(std::move(candidate));
  }
  keep_cheapest(plan, [&](size_t i) {
    if (!built[i]) built[i] = transposed(copies.candidates[i].schedule);
    plan.candidates[i].schedule = *built[i];
    return *built[i];
  });
  return plan;
}

// Drops the schedules of candidates that serve no size range: a plan of a large tree would
// otherwise hold every raced schedule (M^2 ops for hierarchical) until it is written.
void drop_losers(CollectivePlan& plan) {
  for (CollectiveCandidate& candidate : plan.candidates) {
    const bool serves =
        std::any_of(plan.schedules.begin(), plan.schedules.end(),
                    [&](const ir::Schedule& s) { return s.algorithm == candidate.algorithm; });
    if (!serves) candidate.schedule = ir::Schedule{};
  }
}

}  // namespace

bool transposes_at_same_price(const ir::Schedule& copies, const CostParams& cost) {
  // Reductions priced: a transpose loads its receivers' reductions, the copies do not.
  if (cost.reduce_bandwidth > 0) return false;
  // The evaluator prices a step's first chunk round by round (hop k of every chain); a
  // transposed chain runs its hops in reverse order, so rounds hold the same hops reversed only
  // where every op of a step has as many rounds. A pipeline's expansion mixes its base's steps:
  // there every op of the base counts.
  const auto rounds = [](const ir::Op& op) -> size_t {
    const size_t hops = codegen::hop_count(op);
    return op.shape == ir::OpShape::Star ? std::min<size_t>(hops, 1) : hops;
  };
  std::optional<size_t> schedule_rounds;
  for (const ir::Step& step : copies.steps) {
    std::optional<size_t> step_rounds;
    for (const ir::Op& op : step.ops) {
      if (op.begin == op.end) continue;
      const size_t r = rounds(op);
      if (r == 0) continue;
      std::optional<size_t>& same = copies.slices > 1 ? schedule_rounds : step_rounds;
      if (same && *same != r) return false;
      same = r;
    }
  }
  return true;
}

CollectivePlan plan_collective(const Topology& topo, ir::Collective collective, int32_t root,
                               std::span<const std::string> algorithms, const CostParams& cost) {
  check_collective_and_root(topo, collective, root);
  if (!ir::combines(collective)) {
    CollectivePlan plan = race_copies(topo, collective, root, algorithms, cost, {});
    drop_losers(plan);
    return plan;
  }
  const CollectivePlan copies =
      race_copies(topo, copying_mirror(collective), root, algorithms, cost, {});
  CollectivePlan plan = transposed_plan(topo, copies, cost, {});
  drop_losers(plan);
  return plan;
}

std::vector<CollectivePlan> plan_other_collectives(const Topology& topo, const PlanOptions& options,
                                                   std::vector<std::string>* left_out) {
  const auto asked = [&](ir::Collective c) {
    return std::find(options.collectives.begin(), options.collectives.end(), c) !=
           options.collectives.end();
  };
  const auto say = [&](std::string_view what) {
    if (options.progress) options.progress(what);
  };
  const auto named = [](ir::Collective collective, int32_t root) {
    return fmt::format("{}{}", ir::to_string(collective),
                       ir::has_root(collective) ? fmt::format(" (root {})", root) : std::string());
  };
  // Planned per copying collective and root, with its transpose; listed in collective order,
  // then root order, as the plan holds them.
  std::vector<CollectivePlan> plans;
  for (const ir::Collective copying : {ir::Collective::AllGather, ir::Collective::Broadcast}) {
    const ir::Collective combining = copying == ir::Collective::AllGather
                                         ? ir::Collective::ReduceScatter
                                         : ir::Collective::Reduce;
    if (!asked(copying) && !asked(combining)) continue;
    const std::vector<int32_t> roots =
        ir::has_root(copying) ? options.roots : std::vector<int32_t>{0};
    for (int32_t root : roots) {
      check_collective_and_root(topo, copying, root);
      auto start = Clock::now();
      CollectivePlan copies;
      try {
        copies = race_copies(topo, copying, root, options.algorithms, options.cost, options.progress);
      } catch (const CollectiveBeyondLimits& e) {
        if (!options.leave_out_unbuildable || left_out == nullptr) throw;
        for (const ir::Collective c : {combining, copying})
          if (asked(c)) left_out->push_back(fmt::format("{}: {}", named(c, root), e.what()));
        say(fmt::format("{}: left out: {}", named(copying, root), e.what()));
        continue;
      }
      say(fmt::format("{}: {} candidates raced in {:.2f} s", named(copying, root),
                      copies.candidates.size(), seconds_since(start)));
      if (asked(combining)) {
        start = Clock::now();
        CollectivePlan combined = transposed_plan(topo, copies, options.cost, options.progress);
        drop_losers(combined);
        say(fmt::format("{}: transposed from {}'s race in {:.2f} s", named(combining, root),
                        ir::to_string(copying), seconds_since(start)));
        plans.push_back(std::move(combined));
      }
      if (asked(copying)) {
        drop_losers(copies);
        plans.push_back(std::move(copies));
      }
    }
  }
  std::stable_sort(plans.begin(), plans.end(), [](const CollectivePlan& a, const CollectivePlan& b) {
    return a.collective < b.collective;
  });
  return plans;
}

CostFloor collective_floor(const Topology& topo, ir::Collective collective, int32_t root) {
  if (collective == ir::Collective::AllReduce) return cost_floor(topo);
  CostFloor floor;
  const int learners = topo.num_learners();
  if (learners < 2) return floor;
  const bool sharded = ir::has_shards(collective);
  const GroupCuts cuts = group_cuts(topo);
  const auto raise = [&](double per_byte, auto describe) {
    if (per_byte > floor.per_byte) {
      floor.per_byte = per_byte;
      floor.bound_by = describe();
    }
  };
  const double p = learners;
  for (NodeId n = 0; n < topo.num_nodes(); ++n) {
    if (separates_learners(topo, n)) {
      // What must cross the link in its busier direction, per message byte.
      const double k = static_cast<double>(topo.learners_under(n).size());
      const double share = sharded ? std::max(k, p - k) / p : 1.0;
      raise(share / std::min(topo.uplink(n).bandwidth, cuts.below[static_cast<size_t>(n)]),
            [&] { return fmt::format("the link above '{}'", topo.full_name(n)); });
    }
    if (topo.is_learner(n)) continue;
    int groups = topo.degree(n);
    double bandwidth = 0;
    for (NodeId child : topo.children(n)) bandwidth += cuts.below[static_cast<size_t>(child)];
    if (separates_learners(topo, n)) {
      ++groups;
      bandwidth += cuts.above[static_cast<size_t>(n)];
    }
    if (groups < 2) continue;
    // The M groups receive (M - 1) n together: each group what it lacks.
    raise((groups - 1) / bandwidth, [&] {
      return fmt::format("branch '{}' ({} groups)",
                         n == topo.root() ? std::string("root") : topo.full_name(n), groups);
    });
  }
  floor.per_byte_own_uplinks = floor.per_byte;
  if (sharded) {
    const CostFloor all_reduce = cost_floor(topo);
    floor.latency = all_reduce.latency;
    floor.latency_from = all_reduce.latency_from;
    floor.latency_to = all_reduce.latency_to;
  } else {
    for (int rank = 0; rank < learners; ++rank) {
      const double latency = rank == root ? 0 : topo.path_latency(root, rank);
      if (latency > floor.latency) {
        floor.latency = latency;
        floor.latency_from = root;
        floor.latency_to = rank;
      }
    }
  }
  return floor;
}

}  // namespace flexplan
