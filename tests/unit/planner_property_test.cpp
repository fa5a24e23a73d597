// Property tests over thousands of random asymmetric trees (1-4 levels, uneven fan-outs with
// single-learner branches, learners beside switches, heterogeneous links, permuted ranks):
// every schedule of every algorithm verifies and computes the all-reduce on numbers; FlexReduce
// stays within the paper's Eq. 12 at every step; the verifier rejects mutated schedules.
//
// The trees come from testing::RandomTrees with the fixed seeds below; a failure prints the
// seed and the tree's index so it can be replayed.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>
#include <string>

#include "ir/verify.hpp"
#include "planner/algorithm_table.hpp"
#include "planner/algorithms.hpp"
#include "planner/flexreduce.hpp"
#include "planner_test_trees.hpp"

namespace flexplan {
namespace {

using testing::RandomTrees;
using testing::reference_allreduce_error;

// Every algorithm that suits the tree, with pipelined variants of 3 slices.
std::vector<std::string> algorithms_for(const Topology& topo) { return testing::algorithms_for(topo, {3}); }

constexpr uint64_t kTreesSeed = 20261121;
constexpr int kTrees = 2000;

TEST(PlannerProperty, EveryAlgorithmVerifiesOnRandomTrees) {
  RandomTrees trees(kTreesSeed);
  for (int i = 0; i < kTrees; ++i) {
    const auto topo = trees.next();
    for (const auto& name : algorithms_for(topo)) {
      const auto schedule = plan_algorithm(topo, name);
      SCOPED_TRACE("seed " + std::to_string(kTreesSeed) + " tree " + std::to_string(i) + " " +
                   name);
      ASSERT_NO_THROW(ir::verify_schedule(schedule, topo.num_learners()));
      ASSERT_EQ(reference_allreduce_error(schedule, topo.num_learners()), "");
    }
  }
}

// At the step of level l, a learner roots at most Eq. 12's count of reduce ops, generalised to
// its ancestor x at level l; a learner with no ancestor at that level roots none.
TEST(PlannerProperty, FlexReduceCallsStayWithinEq12) {
  RandomTrees trees(kTreesSeed + 1);
  for (int i = 0; i < kTrees / 4; ++i) {
    const auto topo = trees.next();
    const auto schedule = plan_flexreduce(topo);
    SCOPED_TRACE("seed " + std::to_string(kTreesSeed + 1) + " tree " + std::to_string(i));
    for (int level = 0; level < topo.num_levels(); ++level) {
      const auto rooted = reduce_calls_rooted(schedule, topo.num_learners(), level);
      for (int rank = 0; rank < topo.num_learners(); ++rank) {
        NodeId x = topo.parent(topo.learner_node(rank));
        while (x >= 0 && topo.level(x) < level) x = topo.parent(x);
        if (x < 0 || topo.level(x) != level)
          EXPECT_EQ(rooted[rank], 0);
        else
          EXPECT_LE(rooted[rank], eq12_bound(topo, rank, x)) << "rank " << rank;
      }
    }
    const auto stats = reduce_call_stats(topo, schedule);
    EXPECT_LE(stats.top_rooted_max, stats.eq12_bound);
    EXPECT_LE(stats.top_rooted_avg, stats.top_rooted_max);
  }
}

// Every bundled topology, every algorithm small enough to verify quickly.
TEST(PlannerProperty, EveryAlgorithmVerifiesOnBundledTopologies) {
  constexpr uint64_t kMaxOpsHere = 500'000;  // large-10k's ring would have 200 million
  int verified = 0;
  for (const auto& entry :
       std::filesystem::directory_iterator(std::string(FLEXPLAN_SOURCE_DIR) + "/topologies")) {
    if (entry.path().extension() != ".json") continue;
    const auto topo = load_topology(entry.path().string());
    for (const auto& name : algorithms_for(topo)) {
      const auto estimate = find_algorithm(name).estimate(topo);
      if (estimate && estimate->ops > kMaxOpsHere) continue;
      SCOPED_TRACE(entry.path().filename().string() + " " + name);
      EXPECT_NO_THROW(ir::verify_schedule(plan_algorithm(topo, name), topo.num_learners()));
      ++verified;
    }
  }
  EXPECT_GE(verified, 40);
}

enum class Mutation { DropOp, ChangeRoot, WidenGroup, NarrowGroup };

// Applies `mutation` to a random op with at least two members; false when none fits. Roots are
// changed and groups widened on reduces only: a broadcast re-rooted at a rank that already has
// the result, or sending it to one more rank, is still a correct all-reduce.
bool mutate(ir::Schedule& schedule, Mutation mutation, int world_size, std::mt19937_64& rng) {
  const bool reduces_only = mutation == Mutation::ChangeRoot || mutation == Mutation::WidenGroup;
  std::vector<std::pair<size_t, size_t>> candidates;
  for (size_t s = 0; s < schedule.steps.size(); ++s)
    for (size_t o = 0; o < schedule.steps[s].ops.size(); ++o) {
      const auto& op = schedule.steps[s].ops[o];
      if (op.group.size() >= 2 && (!reduces_only || op.kind == ir::OpKind::Reduce))
        candidates.push_back({s, o});
    }
  if (candidates.empty()) return false;
  const auto [s, o] = candidates[std::uniform_int_distribution<size_t>(0, candidates.size() - 1)(rng)];
  auto& ops = schedule.steps.edit()[s].ops;
  auto& op = ops[o];
  const auto pick = [&](size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng); };
  switch (mutation) {
    case Mutation::DropOp:
      ops.erase(ops.begin() + static_cast<std::ptrdiff_t>(o));
      return true;
    case Mutation::ChangeRoot: {
      int32_t root = op.root;
      while (root == op.root) root = static_cast<int32_t>(pick(world_size));
      op.root = root;
      return true;
    }
    case Mutation::WidenGroup: {
      std::vector<int32_t> outside;
      for (int32_t r = 0; r < world_size; ++r)
        if (std::find(op.group.begin(), op.group.end(), r) == op.group.end()) outside.push_back(r);
      if (outside.empty()) return false;
      op.group.insert(op.group.begin() + static_cast<std::ptrdiff_t>(pick(op.group.size() + 1)),
                      outside[pick(outside.size())]);
      return true;
    }
    case Mutation::NarrowGroup: {  // a member other than the root, which may be one implicitly
      auto member = op.group.begin() + static_cast<std::ptrdiff_t>(pick(op.group.size()));
      if (*member == op.root) member = op.group.begin() + (member == op.group.begin() ? 1 : 0);
      op.group.erase(member);
      return true;
    }
  }
  return false;
}

// A mutated schedule that the reference interpreter finds wrong must fail verification. (A
// mutation can still leave a schedule right; those must verify. Such cases are rare, and the
// test insists on that too, so that it keeps testing something.)
TEST(PlannerProperty, VerifierRejectsMutatedSchedules) {
  constexpr uint64_t kMutationSeed = 424242;
  RandomTrees trees(kTreesSeed + 2);
  std::mt19937_64 rng(kMutationSeed);
  int wrong = 0, harmless = 0;
  for (int i = 0; i < kTrees / 2; ++i) {
    const auto topo = trees.next();
    const auto names = algorithms_for(topo);
    const auto original = plan_algorithm(topo, names[i % names.size()]);
    for (auto mutation : {Mutation::DropOp, Mutation::ChangeRoot, Mutation::WidenGroup,
                          Mutation::NarrowGroup}) {
      auto schedule = original;
      if (!mutate(schedule, mutation, topo.num_learners(), rng)) continue;
      SCOPED_TRACE("seed " + std::to_string(kTreesSeed + 2) + " tree " + std::to_string(i) +
                   " " + original.algorithm + " mutation " +
                   std::to_string(static_cast<int>(mutation)));
      if (reference_allreduce_error(schedule, topo.num_learners()).empty()) {
        ++harmless;
        EXPECT_NO_THROW(ir::verify_schedule(schedule, topo.num_learners()));
      } else {
        ++wrong;
        EXPECT_THROW(ir::verify_schedule(schedule, topo.num_learners()), ir::VerifyError);
      }
    }
  }
  EXPECT_GT(wrong, 3 * kTrees / 2);
  EXPECT_LT(harmless, wrong / 20) << "too few mutations break the schedule to test anything";
}

}  // namespace
}  // namespace flexplan
