// Prices of chains, steps and schedules as functions of the message size (cost_model.hpp).
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <utility>

#include "planner/cost_model.hpp"

namespace flexplan {
namespace {

// Message sizes at which chains are compared when thinning a step's chains: every doubling
// from 1 B to 1 TiB covers the sizes where a chain's chunk count moves from one to many.
constexpr int kProbes = 41;
constexpr double kBoundMargin = 1 + 8 * std::numeric_limits<double>::epsilon();

const std::array<double, kProbes>& probes() {
  static const std::array<double, kProbes> sizes = [] {
    std::array<double, kProbes> s{};
    for (int i = 0; i < kProbes; ++i) s[i] = std::exp2(i);
    return s;
  }();
  return sizes;
}

}  // namespace

double ChainCost::at(double bytes, double chunk_bytes) const {
  const double range = share * bytes;
  const double chunks = std::max(1.0, std::ceil(range / chunk_bytes));
  const double chunk = range / chunks;
  return latency + chunk * first_chunk + (range - chunk) * steady;
}

double StepCost::at(double bytes, double chunk_bytes) const {
  double time = per_byte * bytes + hop_latency;
  for (const ChainCost& chain : chains) time = std::max(time, chain.at(bytes, chunk_bytes));
  return time;
}

StepCost make_step(double per_byte, double hop_latency, std::vector<ChainCost> chains,
                   double chunk_bytes, uint64_t repeat) {
  StepCost step;
  step.per_byte = per_byte;
  step.hop_latency = hop_latency;
  step.repeat = repeat;
  // Keep, at every probe size, the slowest chain if it outlasts the bandwidth term there. A
  // chain equal to the one before it is never strictly slower, so runs of equal chains (alike
  // machines side by side) are probed once.
  const auto& probe = probes();
  std::array<int, kProbes> slowest;
  slowest.fill(-1);
  std::array<double, kProbes> worst{};
  for (int p = 0; p < kProbes; ++p) worst[p] = per_byte * probe[p] + hop_latency;
  for (size_t c = 0; c < chains.size(); ++c) {
    if (c > 0 && chains[c] == chains[c - 1]) continue;
    // ChainCost::at never exceeds latency + range x max(first_chunk, steady): a probe where
    // that bound does not beat the slowest so far is skipped without the exact price (steps of
    // large trees hold hundreds of thousands of chains, most of them never the slowest). The
    // margin covers the bound's rounding, which can leave it an ulp below the exact price.
    const double bound_per_byte = chains[c].share * std::max(chains[c].first_chunk, chains[c].steady);
    for (int p = 0; p < kProbes; ++p) {
      if ((chains[c].latency + bound_per_byte * probe[p]) * kBoundMargin <= worst[p]) continue;
      const double time = chains[c].at(probe[p], chunk_bytes);
      if (time > worst[p]) {
        worst[p] = time;
        slowest[p] = static_cast<int>(c);
      }
    }
  }
  for (int p = 0; p < kProbes; ++p) {
    if (slowest[p] < 0) continue;
    const ChainCost& chain = chains[static_cast<size_t>(slowest[p])];
    if (std::find(step.chains.begin(), step.chains.end(), chain) == step.chains.end())
      step.chains.push_back(chain);
  }
  return step;
}

double ScheduleCost::at(double bytes) const {
  double total = 0;
  for (const StepCost& step : steps)
    total += static_cast<double>(step.repeat) * step.at(bytes, chunk_bytes);
  return std::max(total, busy_floor);
}

LinearCost ScheduleCost::asymptote() const {
  // Every range many chunks long: a chain tends to latency + chunk (first - steady) + r steady;
  // each step follows its steepest line (ties: the larger intercept).
  LinearCost total;
  for (const StepCost& step : steps) {
    LinearCost best{step.hop_latency, step.per_byte};
    for (const ChainCost& chain : step.chains) {
      const LinearCost line{chain.latency + chunk_bytes * (chain.first_chunk - chain.steady),
                            chain.share * chain.steady};
      if (line.per_byte > best.per_byte ||
          (line.per_byte == best.per_byte && line.latency > best.latency))
        best = line;
    }
    const double times = static_cast<double>(step.repeat);
    total += LinearCost{best.latency * times, best.per_byte * times};
  }
  // A floor is flat: a line that rises passes it, one that does not stays under it.
  if (total.per_byte <= 0) total.latency = std::max(total.latency, busy_floor);
  return total;
}

uint64_t lowered_hop_count(const ir::Schedule& schedule) {
  uint64_t hops = 0;
  for (const ir::Step& step : schedule.steps)
    for (const ir::Op& op : step.ops)
      if (op.end > op.begin) hops += codegen::hop_count(op);
  return hops * std::max<uint32_t>(schedule.slices, 1);
}

double host_busy_floor(uint64_t hops, const CostParams& params) {
  if (params.host_cores <= 0) return 0;
  return static_cast<double>(hops) * params.hop_overhead / params.host_cores;
}

uint64_t ScheduleCost::step_count() const {
  uint64_t count = 0;
  for (const StepCost& step : steps) count += step.repeat;
  return count;
}

}  // namespace flexplan
