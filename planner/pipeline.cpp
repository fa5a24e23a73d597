// Slicing a schedule into a pipeline (pipeline.hpp).
#include "planner/pipeline.hpp"

#include "planner/link_table.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>

#include <fmt/core.h>

#include "codegen/lowering.hpp"
#include "ir/pipeline_form.hpp"

namespace flexplan {

ir::Schedule pipeline_slices(const ir::Schedule& schedule, uint32_t slices) {
  return ir::expand_pipeline(schedule, slices);
}

PipelinePricer::PipelinePricer(const Topology& topo, const ir::Schedule& base,
                               const CostParams& params)
    : params_(params),
      load_(3 * static_cast<size_t>(topo.num_nodes()), 0),
      steps_(base.steps.size()),
      work_before_(base.steps.size() + 1, 0) {
  ir::require_materialized(base, "PipelinePricer");
  if (base.units == 0)
    throw std::invalid_argument(fmt::format("schedule '{}' has zero units", base.algorithm));
  // The link table and the loading walk are the critical path's too (link_table.hpp).
  LinkTable links(topo, params.reduce_bandwidth);
  const auto reduction_of = [&links](NodeId n) { return links.reduction_of(n); };
  const bool reductions = params.reduce_bandwidth > 0;
  // A hop's one walk up and down its path: adds `share` to each link direction's load (load_,
  // listed in touched_), times its star's incast factor on the root's side (cost_model.hpp,
  // StarIncast), and returns the path's latency.
  const auto walk = [&](NodeId a, NodeId b, double share, const StarIncast& incast, uint64_t& walked) {
    return links.walk(a, b, share, incast, [&](uint32_t direction, double load) {
      ++walked;
      if (load_[direction] == 0) touched_.push_back(direction);
      load_[direction] += load;
    });
  };
  // The loads gathered in load_, as a sparse list (load_ is left cleared).
  const auto take_loads = [&] {
    SparseLoads out;
    out.reserve(touched_.size());
    for (uint32_t direction : touched_) out.emplace_back(direction, load_[direction]);
    clear_loads();
    return out;
  };
  const auto units = static_cast<double>(base.units);
  // With their op's share and StarIncast (an index into incasts; 0: none).
  std::vector<std::pair<Hop, std::pair<double, uint32_t>>> hops;
  std::vector<std::pair<Hop, std::pair<double, uint32_t>>> by_round;  // the same, in order of round
  std::vector<StarIncast> incasts;
  std::vector<std::pair<uint32_t, double>> sums;  // a summing receiver's reductions, and the share
  std::vector<codegen::Hop> lowered;
  std::vector<double> star_latencies;  // one star op's hops, queued at its root
  uint64_t round_links = 0;  // walked again by round: not counted in links_walked_
  for (size_t s = 0; s < base.steps.size(); ++s) {
    BaseStep& step = steps_[s];
    hops.clear();
    sums.clear();
    incasts.assign(1, StarIncast{});
    const auto& ops = base.steps[s].ops;
    for (size_t i = 0; i < ops.size(); ++i) {
      const ir::Op& op = ops[i];
      check_op_ranks(base, op, s, i, topo.num_learners());
      if (op.end == op.begin) continue;
      const double share = static_cast<double>(op.end - op.begin) / units;
      const size_t first = hops.size();
      uint32_t round = 0;
      double chain_latency = 0;
      lowered.clear();
      codegen::append_hops(op, lowered);
      uint32_t incast = 0;
      if (const StarIncast star = star_incast(topo, op, params); star.factor != 1) {
        incast = static_cast<uint32_t>(incasts.size());
        incasts.push_back(star);
      }
      for (size_t h = 0; h < lowered.size(); ++h) {
        const NodeId from = topo.learner_node(lowered[h].src), to = topo.learner_node(lowered[h].dst);
        // The step's loads are gathered hop by hop on the same walk that sums the latency.
        const double hop_latency = walk(from, to, share, incasts[incast], links_walked_) + params.hop_overhead;
        if (op.shape == ir::OpShape::Star)
          star_latencies.push_back(hop_latency);
        else
          step.hop_latency = std::max(step.hop_latency, hop_latency);
        chain_latency += hop_latency;
        hops.push_back({{from, to, round, -1}, {share, incast}});
        if (reductions && hop_sums(op, lowered[h], h)) sums.emplace_back(reduction_of(to), share);
        if (op.shape == ir::OpShape::Chain) ++round;  // a star's hops run side by side
      }
      queue_star_hops(star_latencies.size(), params.hop_overhead,
                      [&](size_t k) -> double& { return star_latencies[k]; });
      for (const double latency : star_latencies) step.hop_latency = std::max(step.hop_latency, latency);
      star_latencies.clear();
      // A one-hop op never outlasts the bandwidth term plus one hop's latency.
      if (op.shape == ir::OpShape::Chain && hops.size() - first >= 2) {
        for (size_t h = first; h < hops.size(); ++h)
          hops[h].first.chain = static_cast<int32_t>(step.chains.size());
        ChainCost chain;
        chain.share = share;
        chain.latency = chain_latency;
        step.chains.push_back(chain);
      }
    }
    // The receivers' reductions, summed per learner like the link directions.
    for (const auto& [at, share] : sums) {
      if (load_[at] == 0) touched_.push_back(at);
      load_[at] += share;
    }
    step.loads = take_loads();
    const auto record_work = [&] {
      uint64_t entries = step.loads.size();
      for (const auto& loads : step.round_loads) entries += loads.size();
      work_before_[s + 1] = work_before_[s] + 2 * step.chain_hops.size() + step.chains.size() +
                            entries / kLoadEntriesPerWork;
    };
    if (step.chains.empty()) {
      record_work();
      continue;
    }
    // Hops in order of round, each round's in op order (a counting sort: rounds are few).
    uint32_t rounds = 0;
    for (const auto& [hop, share] : hops) rounds = std::max(rounds, hop.round + 1);
    std::vector<size_t> round_begin(rounds + 1, 0);
    for (const auto& [hop, share] : hops) ++round_begin[hop.round + 1];
    for (uint32_t r = 0; r < rounds; ++r) round_begin[r + 1] += round_begin[r];
    by_round.resize(hops.size());
    {
      std::vector<size_t> next(round_begin.begin(), round_begin.end() - 1);
      for (const auto& hop : hops) by_round[next[hop.first.round]++] = hop;
    }
    step.round_loads.resize(rounds);
    for (uint32_t r = 0; r < rounds; ++r) {
      for (size_t h = round_begin[r]; h < round_begin[r + 1]; ++h)
        walk(by_round[h].first.from, by_round[h].first.to, by_round[h].second.first,
             incasts[by_round[h].second.second], round_links);
      step.round_loads[r] = take_loads();
    }
    step.chain_hops.reserve(static_cast<size_t>(
        std::count_if(by_round.begin(), by_round.end(), [](const auto& hop) { return hop.first.chain >= 0; })));
    for (const auto& [hop, share] : by_round)
      if (hop.chain >= 0) step.chain_hops.push_back(hop);
    record_work();
  }
  parent_ = std::move(links.parent);
  depth_ = std::move(links.depth);
  inverse_bandwidth_ = std::move(links.inverse_bandwidth);
}

void PipelinePricer::add(const SparseLoads& loads) {
  for (const auto& [direction, load] : loads) {
    if (load_[direction] == 0) touched_.push_back(direction);
    load_[direction] += load;
    busiest_ = std::max(busiest_, load_[direction] * inverse_bandwidth_[direction]);
  }
}

std::vector<StepCost> PipelinePricer::step_floors() const {
  std::vector<StepCost> floors(steps_.size());
  for (size_t s = 0; s < steps_.size(); ++s) {
    const BaseStep& step = steps_[s];
    for (const auto& [direction, load] : step.loads)
      floors[s].per_byte = std::max(floors[s].per_byte, load * inverse_bandwidth_[direction]);
    floors[s].hop_latency = step.hop_latency;
    double slowest_chain = 0;
    for (const ChainCost& chain : step.chains) slowest_chain = std::max(slowest_chain, chain.latency);
    if (slowest_chain > 0) floors[s].chains.push_back(ChainCost{slowest_chain, 0, 0, 0});
  }
  return floors;
}

double PipelinePricer::busiest_total() {
  clear_loads();
  for (const BaseStep& step : steps_) add(step.loads);
  const double busiest = busiest_;
  clear_loads();
  return busiest;
}

void PipelinePricer::clear_loads() {
  for (uint32_t direction : touched_) load_[direction] = 0;
  touched_.clear();
  busiest_ = 0;
}

// Seconds per message byte of the busiest link direction between a and b (up from a, down to
// b) under the loads added so far.
double PipelinePricer::busiest_on_path(NodeId a, NodeId b) const {
  double busiest = 0;
  while (a != b) {
    if (depth_[a] >= depth_[b]) {
      busiest = std::max(busiest, load_[2 * a] * inverse_bandwidth_[2 * a]);
      a = parent_[a];
    } else {
      busiest = std::max(busiest, load_[2 * b + 1] * inverse_bandwidth_[2 * b + 1]);
      b = parent_[b];
    }
  }
  return busiest;
}

// Prices the window as the evaluator prices one step holding every op of base steps
// first..last (evaluator.cpp): the bandwidth term from the whole window's loads, each chain's
// steady pace from them too, and its first chunk from the loads of its own round.
const StepCost& PipelinePricer::window(size_t first, size_t last) {
  const auto key = std::make_pair(first, last);
  if (auto it = windows_.find(key); it != windows_.end()) return it->second;
  if (first == last && steps_[first].chains.empty()) {
    // One base step without chains (a base priced step by step): its busiest link direction,
    // read off its loads without spreading them over load_ and clearing them again (the same
    // doubles: each direction is listed once, and 0 + load is load).
    double per_byte = 0;
    for (const auto& [direction, load] : steps_[first].loads)
      per_byte = std::max(per_byte, load * inverse_bandwidth_[direction]);
    return windows_.emplace(key, make_step(per_byte, steps_[first].hop_latency, {}, params_.chunk_bytes))
        .first->second;
  }
  double hop_latency = 0;
  std::vector<ChainCost> chains;
  std::vector<size_t> chain_offset;  // by step in the window
  size_t rounds = 0;
  for (size_t s = first; s <= last; ++s) {
    const BaseStep& step = steps_[s];
    add(step.loads);
    hop_latency = std::max(hop_latency, step.hop_latency);
    chain_offset.push_back(chains.size());
    chains.insert(chains.end(), step.chains.begin(), step.chains.end());
    rounds = std::max(rounds, step.round_loads.size());
  }
  const double per_byte = busiest_;
  if (!chains.empty()) {
    // Later chunks: at the pace the whole window's load allows on each hop's busiest link.
    for (size_t s = first; s <= last; ++s)
      for (const Hop& hop : steps_[s].chain_hops) {
        ChainCost& chain = chains[chain_offset[s - first] + static_cast<size_t>(hop.chain)];
        chain.steady = std::max(chain.steady, busiest_on_path(hop.from, hop.to) / chain.share);
      }
    // The first chunk: each hop at the pace its round's load allows (hops sorted by round).
    clear_loads();
    std::vector<size_t> cursor(last - first + 1, 0);
    for (uint32_t round = 0; round < rounds; ++round) {
      for (size_t s = first; s <= last; ++s) {
        const BaseStep& step = steps_[s];
        if (round < step.round_loads.size())
          add(step.round_loads[round]);
        else if (round == 0 && step.round_loads.empty())
          add(step.loads);  // no chains: every hop is in round 0
      }
      for (size_t s = first; s <= last; ++s) {
        const auto& hops = steps_[s].chain_hops;
        size_t& h = cursor[s - first];
        for (; h < hops.size() && hops[h].round == round; ++h) {
          ChainCost& chain = chains[chain_offset[s - first] + static_cast<size_t>(hops[h].chain)];
          chain.first_chunk += busiest_on_path(hops[h].from, hops[h].to) / chain.share;
        }
      }
      clear_loads();
    }
  }
  clear_loads();
  return windows_
      .emplace(key, make_step(per_byte, hop_latency, std::move(chains), params_.chunk_bytes))
      .first->second;
}

std::vector<std::pair<std::pair<size_t, size_t>, uint64_t>> pipeline_windows(size_t steps,
                                                                              uint32_t slices) {
  std::vector<std::pair<std::pair<size_t, size_t>, uint64_t>> out;
  const size_t m = steps;
  const size_t total = m == 0 ? 0 : m + slices - 1;
  for (size_t t = 0; t < total;) {
    const size_t first = t + 1 > slices ? t + 1 - slices : 0;
    const size_t last = std::min(t, m - 1);
    // The full window repeats while every base step has a slice in it.
    const size_t run = first == 0 && last == m - 1 && slices >= m ? slices - m + 1 : 1;
    out.push_back({{first, last}, run});
    t += run;
  }
  return out;
}

uint64_t PipelinePricer::work(uint32_t slices, bool single_steps) const {
  return pipeline_windows_work(work_before_, slices, single_steps,
                               [&](const std::pair<size_t, size_t>& window) { return windows_.contains(window); });
}

ScheduleCost PipelinePricer::cost(uint32_t slices) {
  if (slices == 0) throw std::invalid_argument("pipeline: zero slices");
  ScheduleCost cost;
  cost.chunk_bytes = params_.chunk_bytes;
  const double scale = 1.0 / slices;
  for (const auto& [bounds, repeat] : pipeline_windows(steps_.size(), slices)) {
    StepCost step = window(bounds.first, bounds.second);
    step.per_byte *= scale;
    for (ChainCost& chain : step.chains) chain.share *= scale;
    step.repeat = repeat;
    cost.steps.push_back(std::move(step));
  }
  return cost;
}

}  // namespace flexplan
