// The sparse all-reduce's transfer schedule (ir/sparse_exchange.hpp): a verified all-reduce on
// random machine trees, its exchange steps confined to slice owners, and sums that cross a rack
// once instead of once per machine.
#include <gtest/gtest.h>

#include <functional>
#include <random>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "ir/sparse_exchange.hpp"
#include "ir/verify.hpp"

namespace flexplan::ir {
namespace {

// Learner names for machines given as (path, learners), ranks dealt out in a shuffled order.
std::vector<std::string> learners_of(const std::vector<std::pair<std::string, int>>& machines, std::mt19937* rng) {
  std::vector<std::string> names;
  for (const auto& [path, count] : machines)
    for (int g = 0; g < count; ++g) names.push_back(fmt::format("{}/g{}", path, g));
  if (rng != nullptr) std::shuffle(names.begin(), names.end(), *rng);
  return names;
}

// Ranks of different machines that exchange in the sparse steps, once per (step, sender,
// receiver), as the runtime's messages are.
size_t messages_between(const SparseExchange& x, const SparseLayout& layout,
                        const std::function<bool(int32_t, int32_t)>& counted) {
  size_t messages = 0;
  for (size_t s = x.first_sparse; s < x.end_sparse; ++s) {
    std::set<std::pair<int32_t, int32_t>> pairs;
    for (const Op& op : x.schedule.steps[s].ops)
      for (int32_t member : op.group) {
        if (member == op.root) continue;
        const auto pair = op.kind == OpKind::Reduce ? std::pair{member, op.root} : std::pair{op.root, member};
        if (layout.machine_of[static_cast<size_t>(member)] != layout.machine_of[static_cast<size_t>(op.root)] &&
            counted(pair.first, pair.second))
          pairs.insert(pair);
      }
    messages += pairs.size();
  }
  return messages;
}

TEST(SparseExchange, TwoPlusThreeIsOneExchangeBetweenOverlappingOwners) {
  const auto layout = sparse_layout(std::vector<std::string>{"sw/a/g0", "sw/a/g1", "sw/b/g0", "sw/b/g1", "sw/b/g2"});
  const auto x = sparse_exchange(layout);
  // Boundaries 0, 1/3, 1/2, 2/3, 1.
  ASSERT_EQ(x.schedule.units, 4u);
  EXPECT_EQ(x.bounds[2].num, 1u);
  EXPECT_EQ(x.bounds[2].den, 2u);
  ASSERT_EQ(x.schedule.steps.size(), 3u);
  EXPECT_EQ(x.first_sparse, 1u);
  EXPECT_EQ(x.end_sparse, 2u);
  // Four runs of owners (a0 b0, a0 b1, a1 b1, a1 b2), each combined by both.
  const Step& exchange = x.schedule.steps[1];
  ASSERT_EQ(exchange.ops.size(), 8u);
  EXPECT_EQ(exchange.ops[2].group, (RankList{0, 3}));
  EXPECT_EQ(exchange.ops[2].begin, 1u);
  EXPECT_EQ(exchange.ops[2].end, 2u);
  EXPECT_NO_THROW(verify_schedule(x.schedule, 5));
  // The boundaries are where the layout cuts slices.
  for (uint64_t count : {0u, 1u, 5u, 12u, 1000003u}) {
    EXPECT_EQ(x.element(1, count), layout.slice(2, count).end);
    EXPECT_EQ(x.element(2, count), layout.slice(0, count).end);
    EXPECT_EQ(x.element(4, count), count);
  }
}

TEST(SparseExchange, RacksCombineBeforeCrossing) {
  // Two racks of three 2-learner machines: each half's owners cross the spine once each way,
  // not once per machine of the other rack.
  const std::vector<std::pair<std::string, int>> racked = {{"sw/r0/m0", 2}, {"sw/r0/m1", 2}, {"sw/r0/m2", 2},
                                                           {"sw/r1/m3", 2}, {"sw/r1/m4", 2}, {"sw/r1/m5", 2}};
  std::vector<std::pair<std::string, int>> flat = racked;
  for (auto& [path, count] : flat) path = "sw/" + path.substr(6);
  const auto racked_layout = sparse_layout(learners_of(racked, nullptr));
  const auto flat_layout = sparse_layout(learners_of(flat, nullptr));
  const auto racked_x = sparse_exchange(racked_layout);
  const auto flat_x = sparse_exchange(flat_layout);
  EXPECT_NO_THROW(verify_schedule(racked_x.schedule, 12));
  EXPECT_NO_THROW(verify_schedule(flat_x.schedule, 12));
  // Ranks 0-5 are rack 0 in both layouts.
  auto crosses = [](int32_t from, int32_t to) { return (from < 6) != (to < 6); };
  // Flat: each of rack 0's six owners sends to the three owners of its slice in rack 1 and
  // back: 2 x 6 x 3. Racked: each slice's first-machine owners exchange once each way.
  EXPECT_EQ(messages_between(flat_x, flat_layout, crosses), 36u);
  EXPECT_EQ(messages_between(racked_x, racked_layout, crosses), 4u);
  // Up within racks, up across, down within racks.
  EXPECT_EQ(racked_x.end_sparse - racked_x.first_sparse, 3u);
}

// Random machine trees: uneven depths, racks of one machine, a machine whose name is also a
// node with machines below it, and unnamed plans.
std::vector<std::string> random_names(std::mt19937& rng) {
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  std::vector<std::pair<std::string, int>> machines;
  const int count = pick(1, 9);
  for (int m = 0; m < count; ++m) {
    std::string path = "sw";
    const int depth = pick(0, 3);
    for (int d = 0; d < depth; ++d) path += fmt::format("/n{}", pick(0, 2));
    path += fmt::format("/m{}", m);
    if (pick(0, 5) == 0 && !machines.empty()) path = machines[static_cast<size_t>(pick(0, m - 1))].first + "/sub" + std::to_string(m);
    machines.push_back({path, pick(1, 6)});
  }
  return learners_of(machines, &rng);
}

TEST(SparseExchange, RandomTreesVerifyAndExchangeOnlyBetweenOwners) {
  std::mt19937 rng(20261124);
  for (int trial = 0; trial < 300; ++trial) {
    Plan plan;
    plan.rank_names = random_names(rng);
    plan.world_size = static_cast<int32_t>(plan.rank_names.size());
    if (trial % 10 == 0) plan.rank_names.clear();  // one machine per rank
    const auto layout = sparse_layout(plan);
    const auto x = sparse_exchange(layout);
    const std::string where = fmt::format("trial {}: {}", trial, fmt::join(plan.rank_names, " "));
    ASSERT_NO_THROW(verify_schedule(x.schedule, plan.world_size)) << where;
    ASSERT_LE(x.first_sparse, x.end_sparse);
    ASSERT_EQ(x.bounds.size(), x.schedule.units + 1);
    for (size_t s = 0; s < x.schedule.steps.size(); ++s) {
      const bool sparse = s >= x.first_sparse && s < x.end_sparse;
      std::set<std::pair<int32_t, uint64_t>> sent, received;  // (rank, unit)
      for (const Op& op : x.schedule.steps[s].ops) {
        for (int32_t member : op.group) {
          const int32_t machine = layout.machine_of[static_cast<size_t>(member)];
          const int32_t root_machine = layout.machine_of[static_cast<size_t>(op.root)];
          if (!sparse) {
            EXPECT_EQ(machine, root_machine) << where << ": step " << s << " leaves a machine";
            continue;
          }
          // The member owns the op's range: its slice's bounds enclose it.
          const uint64_t n = layout.machines[static_cast<size_t>(machine)].size();
          const uint64_t j = static_cast<uint64_t>(layout.local_index[static_cast<size_t>(member)]);
          const auto& b = x.bounds[op.begin];
          const auto& e = x.bounds[op.end];
          EXPECT_LE(static_cast<unsigned __int128>(j) * b.den, static_cast<unsigned __int128>(b.num) * n) << where;
          EXPECT_LE(static_cast<unsigned __int128>(e.num) * n, static_cast<unsigned __int128>(j + 1) * e.den) << where;
        }
        for (uint64_t u = op.begin; u < op.end; ++u)
          for (int32_t member : op.group) {
            if (member == op.root) continue;
            if (op.kind == OpKind::Broadcast) {
              sent.insert({op.root, u});
              received.insert({member, u});
            } else {
              sent.insert({member, u});
            }
          }
      }
      // The runtime receives broadcasts straight into the buffer: nothing it sends in the step
      // may be overwritten by them.
      for (const auto& item : received) EXPECT_EQ(sent.count(item), 0u) << where << ": step " << s;
    }
    // Without any one of its ops the schedule is no longer an all-reduce, and the verifier says so.
    for (size_t s = 0; s < x.schedule.steps.size(); ++s)
      for (size_t o = 0; o < x.schedule.steps[s].ops.size(); ++o) {
        Schedule broken = x.schedule;
        broken.steps.edit()[s].ops.erase(broken.steps.edit()[s].ops.begin() + static_cast<ptrdiff_t>(o));
        EXPECT_THROW(verify_schedule(broken, plan.world_size), std::exception) << where << ": step " << s << " op " << o;
      }
  }
}

}  // namespace
}  // namespace flexplan::ir
