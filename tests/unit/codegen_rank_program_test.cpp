// The chained point-to-point lowering (codegen/rank_program.hpp): chain positions, staged writes,
// where own data is read, and, over random trees and every algorithm, that all ranks' programs
// fit together hop by hop and, run on numbers with the runtime's rules, compute the all-reduce.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "codegen/lowering.hpp"
#include "codegen/rank_program.hpp"
#include "ir/verify.hpp"
#include "planner/algorithm_table.hpp"
#include "planner/algorithms.hpp"
#include "tests/unit/planner_test_trees.hpp"

namespace flexplan::codegen {
namespace {

// Every algorithm that applies to the tree, and a pipelined variant of those that pipeline.
std::vector<std::string> algorithms_for(const Topology& topo) {
  std::vector<std::string> names;
  for (const AlgorithmRow& row : algorithm_table()) {
    if (row.unsuitable && !row.unsuitable(topo).empty()) continue;
    names.emplace_back(row.name);
    if (row.pipelines) names.push_back(std::string(row.name) + "@2");
  }
  return names;
}

ir::Op op(ir::OpKind kind, uint64_t begin, uint64_t end, int32_t root, std::vector<int32_t> group) {
  return {kind, begin, end, root, std::move(group)};
}

TEST(RankProgram, ChainPositionsFollowTheLowering) {
  ir::Schedule schedule;
  schedule.units = 4;
  ir::Step step;
  step.ops.push_back(op(ir::OpKind::Reduce, 0, 2, 1, {0, 1, 2}));     // chain 2 -> 0 -> 1
  step.ops.push_back(op(ir::OpKind::Broadcast, 2, 4, 3, {0, 1, 3}));  // chain 3 -> 0 -> 1
  schedule.steps.push_back(step);
  const RankProgram zero = lower_rank_program(schedule, 0);
  ASSERT_EQ(zero.steps[0].tasks.size(), 2u);
  EXPECT_EQ(zero.steps[0].tasks[0].prev, 2);
  EXPECT_EQ(zero.steps[0].tasks[0].next, 1);
  EXPECT_TRUE(zero.steps[0].tasks[0].add_own);
  EXPECT_EQ(zero.steps[0].tasks[1].prev, 3);
  EXPECT_EQ(zero.steps[0].tasks[1].next, 1);
  const RankProgram one = lower_rank_program(schedule, 1);
  EXPECT_EQ(one.steps[0].tasks[0].prev, 0);
  EXPECT_EQ(one.steps[0].tasks[0].next, -1);
  EXPECT_TRUE(one.steps[0].tasks[0].writes());
  EXPECT_TRUE(lower_rank_program(schedule, 4).steps[0].tasks.empty());  // not involved
}

TEST(RankProgram, RootOutsideTheGroupOnlyReceives) {
  ir::Schedule schedule;
  schedule.units = 2;
  schedule.steps.push_back({ir::Phase::Reduce, 0, {op(ir::OpKind::Reduce, 0, 2, 3, {0, 1})}});
  const RankProgram root = lower_rank_program(schedule, 3);
  ASSERT_EQ(root.steps[0].tasks.size(), 1u);
  EXPECT_EQ(root.steps[0].tasks[0].prev, 1);
  EXPECT_FALSE(root.steps[0].tasks[0].add_own);
  EXPECT_FALSE(root.steps[0].tasks[0].reads_own());
  const RankProgram first = lower_rank_program(schedule, 0);
  EXPECT_EQ(first.steps[0].tasks[0].next, 1);
  EXPECT_FALSE(first.steps[0].tasks[0].receives());
}

TEST(RankProgram, WritesOverlappingAnotherOpsReadsAreStaged) {
  ir::Schedule schedule;
  schedule.units = 4;
  ir::Step step;
  step.ops.push_back(op(ir::OpKind::Reduce, 0, 2, 0, {0, 1}));  // rank 0 writes [0, 2)
  step.ops.push_back(op(ir::OpKind::Reduce, 1, 3, 1, {0, 1}));  // rank 0 reads [1, 3)
  step.ops.push_back(op(ir::OpKind::Reduce, 3, 4, 0, {0, 1}));  // rank 0 writes [3, 4): no overlap
  schedule.steps.push_back(step);
  const RankProgram program = lower_rank_program(schedule, 0);
  const auto& tasks = program.steps[0].tasks;
  ASSERT_EQ(tasks.size(), 3u);
  EXPECT_TRUE(tasks[0].stage_writes);
  EXPECT_FALSE(tasks[1].stage_writes);  // rank 0 only sends in it
  EXPECT_FALSE(tasks[2].stage_writes);
}

TEST(RankProgram, OwnDataIsReadFromTheSendBufferUntilWritten) {
  ir::Schedule schedule;
  schedule.units = 4;
  ir::Step first, second;
  first.ops.push_back(op(ir::OpKind::Reduce, 0, 2, 0, {0, 1}));   // rank 0 writes [0, 2)
  second.ops.push_back(op(ir::OpKind::Reduce, 0, 2, 1, {0, 1}));  // rank 0 reads [0, 2): written
  second.ops.push_back(op(ir::OpKind::Reduce, 1, 3, 1, {0, 1}));  // [1, 3): [2, 3) unwritten
  schedule.steps = {first, second};
  const RankProgram program = lower_rank_program(schedule, 0);
  EXPECT_TRUE(program.steps[0].tasks[0].own_from_send);  // the root adds its untouched input
  EXPECT_TRUE(program.steps[0].copy_in.empty());
  EXPECT_FALSE(program.steps[1].tasks[0].own_from_send);
  EXPECT_FALSE(program.steps[1].tasks[1].own_from_send);
  EXPECT_TRUE(program.steps[1].copy_in == (std::vector<UnitRange>{{2, 3}}));
  // [2, 3) was copied in for step 1; only [3, 4) is neither written nor copied.
  EXPECT_TRUE(program.copy_at_end == (std::vector<UnitRange>{{3, 4}}));
  const RankProgram one = lower_rank_program(schedule, 1);
  EXPECT_TRUE(one.steps[0].tasks[0].own_from_send);  // rank 1 only sends its input
}

// --- all ranks' programs together ---------------------------------------------------------------

// A value that counts its contributions, so that a contribution counted twice shows.
struct Value {
  uint64_t sum = 0;
  uint32_t count = 0;
  friend bool operator==(const Value&, const Value&) = default;
};

// Runs every rank's program out of place on `count` elements the way the runtime does: a step's
// copy-ins, then its ops one chain at a time (in op order, or reversed), a task reading its own
// data from the send buffer when own_from_send, writing into its stage when stage_writes (copied
// in when the step ends) and into the receive buffer otherwise; then the copies at the end.
// Returns "" or what is wrong.
std::string run_programs(const ir::Schedule& schedule, int world, uint64_t count, bool reverse_ops) {
  std::vector<RankProgram> programs;
  for (int r = 0; r < world; ++r) programs.push_back(lower_rank_program(schedule, r));
  std::mt19937_64 rng(count * 31 + world);
  std::vector<std::vector<Value>> send(world), recv(world);
  Value total;
  for (int r = 0; r < world; ++r) {
    const uint64_t weight = rng();
    send[r].assign(count, Value{weight, 1});
    recv[r].assign(count, Value{0xdeadbeef, 1000});  // garbage: the program must overwrite it
    total.sum += weight;
    total.count += 1;
  }
  const auto elements = [&](uint64_t begin_unit, uint64_t end_unit) {
    return std::pair{ir::unit_to_element(begin_unit, schedule.units, count),
                     ir::unit_to_element(end_unit, schedule.units, count)};
  };
  const auto copy_in = [&](int r, const std::vector<UnitRange>& ranges) {
    for (const UnitRange& range : ranges) {
      const auto [b, e] = elements(range.begin, range.end);
      std::copy(send[r].begin() + b, send[r].begin() + e, recv[r].begin() + b);
    }
  };
  for (size_t s = 0; s < schedule.steps.size(); ++s) {
    for (int r = 0; r < world; ++r) copy_in(r, programs[r].steps[s].copy_in);
    // Each rank's task of each op.
    std::map<std::pair<uint32_t, int>, const Task*> task_of;
    for (int r = 0; r < world; ++r)
      for (const Task& task : programs[r].steps[s].tasks) task_of[{task.op_index, r}] = &task;
    struct Staged {
      int rank;
      uint64_t begin;
      std::vector<Value> values;
    };
    std::vector<Staged> staged;
    std::vector<size_t> order(schedule.steps[s].ops.size());
    for (size_t o = 0; o < order.size(); ++o) order[o] = reverse_ops ? order.size() - 1 - o : o;
    for (const size_t o : order) {
      const ir::Op& the_op = schedule.steps[s].ops[o];
      const auto [b, e] = elements(the_op.begin, the_op.end);
      // The chain starts at the member that receives nothing.
      int at = -1;
      for (int r = 0; r < world; ++r) {
        const auto it = task_of.find({static_cast<uint32_t>(o), r});
        if (it != task_of.end() && !it->second->receives()) {
          if (at >= 0) return "step " + std::to_string(s) + " op " + std::to_string(o) + ": two chain starts";
          at = r;
        }
      }
      if (at < 0) return "step " + std::to_string(s) + " op " + std::to_string(o) + ": no chain start";
      const auto own = [&](int r, const Task& task) {
        const auto& buffer = task.own_from_send ? send[r] : recv[r];
        return std::vector<Value>(buffer.begin() + b, buffer.begin() + e);
      };
      std::vector<Value> moving = own(at, *task_of[{static_cast<uint32_t>(o), at}]);
      for (int hops = 0;; ++hops) {
        const Task& task = *task_of[{static_cast<uint32_t>(o), at}];
        if (task.receives()) {
          if (task.reduce && task.add_own) {
            const auto mine = own(at, task);
            for (size_t i = 0; i < moving.size(); ++i) {
              moving[i].sum += mine[i].sum;
              moving[i].count += mine[i].count;
            }
          }
          if (task.writes()) {
            if (task.stage_writes) {
              staged.push_back({at, b, moving});
            } else {
              std::copy(moving.begin(), moving.end(), recv[at].begin() + b);
            }
          }
        }
        if (!task.sends()) break;
        const auto next = task_of.find({static_cast<uint32_t>(o), task.next});
        if (next == task_of.end() || next->second->prev != at || hops > world)
          return "step " + std::to_string(s) + " op " + std::to_string(o) + ": rank " +
                 std::to_string(task.next) + " does not receive from rank " + std::to_string(at);
        at = task.next;
      }
    }
    for (const Staged& stage : staged)
      std::copy(stage.values.begin(), stage.values.end(), recv[stage.rank].begin() + stage.begin);
  }
  for (int r = 0; r < world; ++r) {
    copy_in(r, programs[r].copy_at_end);
    for (uint64_t i = 0; i < count; ++i)
      if (!(recv[r][i] == total))
        return "rank " + std::to_string(r) + " element " + std::to_string(i) + " of " +
               std::to_string(count) + " holds " + std::to_string(recv[r][i].count) + " contributions";
    for (uint64_t i = 0; i < count; ++i)
      if (send[r][i].count != 1) return "rank " + std::to_string(r) + ": the send buffer was written";
  }
  return "";
}

// Every hop that lower_op gives appears once at its sender (as next) and once at its receiver
// (as prev), in the same step and op, and nowhere else; both number it alike among the
// receiver's receives.
std::string check_hops(const ir::Schedule& schedule, int world) {
  std::map<std::tuple<size_t, uint32_t, int>, const Task*> task_of;
  std::vector<RankProgram> programs;
  for (int r = 0; r < world; ++r) programs.push_back(lower_rank_program(schedule, r));
  size_t tasks = 0;
  for (int r = 0; r < world; ++r)
    for (size_t s = 0; s < schedule.steps.size(); ++s)
      for (const Task& task : programs[r].steps[s].tasks) {
        task_of[{s, task.op_index, r}] = &task;
        ++tasks;
      }
  size_t members = 0;
  for (size_t s = 0; s < schedule.steps.size(); ++s)
    for (uint32_t o = 0; o < schedule.steps[s].ops.size(); ++o) {
      const auto hops = lower_op(schedule.steps[s].ops[o]);
      if (!hops.empty()) members += hops.size() + 1;
      for (const Hop& hop : hops) {
        const auto from = task_of.find({s, o, hop.src});
        const auto to = task_of.find({s, o, hop.dst});
        if (from == task_of.end() || from->second->next != hop.dst || to == task_of.end() ||
            to->second->prev != hop.src || to->second->add_own != hop.dst_contributes ||
            from->second->next_receive_index != to->second->receive_index)
          return "step " + std::to_string(s) + " op " + std::to_string(o) + ": hop " +
                 std::to_string(hop.src) + " -> " + std::to_string(hop.dst) + " not lowered";
      }
    }
  if (tasks != members) return std::to_string(tasks) + " tasks for " + std::to_string(members) + " chain members";
  // Each rank's receives are numbered 0, 1, ... in (step, op) order (the runtime's tags).
  for (int r = 0; r < world; ++r) {
    uint64_t expected = 0;
    for (const StepProgram& step : programs[r].steps)
      for (const Task& task : step.tasks)
        if (task.receives() && task.receive_index != expected++)
          return "rank " + std::to_string(r) + ": receive numbered " + std::to_string(task.receive_index) +
                 ", expected " + std::to_string(expected - 1);
  }
  return "";
}

TEST(RankProgram, EveryAlgorithmOnRandomTreesComputesTheAllReduce) {
  testing::RandomTrees trees(2024);
  for (int t = 0; t < 40; ++t) {
    const Topology topo = trees.next(14);
    for (const std::string& algorithm : algorithms_for(topo)) {
      const ir::Schedule schedule = plan_algorithm(topo, algorithm);
      const int world = topo.num_learners();
      ASSERT_NO_THROW(ir::verify_schedule(schedule, world));
      SCOPED_TRACE(topo.name() + " " + algorithm + " units " + std::to_string(schedule.units));
      EXPECT_EQ(check_hops(schedule, world), "");
      for (const uint64_t count : {schedule.units, uint64_t{1}, uint64_t{7}, 3 * schedule.units + 1}) {
        if (count > 5000) continue;
        EXPECT_EQ(run_programs(schedule, world, count, false), "") << "count " << count;
        EXPECT_EQ(run_programs(schedule, world, count, true), "") << "count " << count << ", ops reversed";
      }
    }
  }
}

// A step where every rank roots a reduce of the whole range over everyone: each rank writes what
// it also sends in the other ops, so its writes must be staged; without staging the interpreter
// above reads a value already summed and counts contributions twice.
TEST(RankProgram, EveryoneReducesTheSameRangeNeedsStaging) {
  const int world = 4;
  ir::Schedule schedule;
  schedule.algorithm = "direct";
  schedule.units = 3;
  ir::Step step;
  for (int r = 0; r < world; ++r) step.ops.push_back(op(ir::OpKind::Reduce, 0, 3, r, {0, 1, 2, 3}));
  schedule.steps.push_back(step);
  ASSERT_NO_THROW(ir::verify_schedule(schedule, world));
  for (int r = 0; r < world; ++r) {
    const RankProgram program = lower_rank_program(schedule, r);
    for (const Task& task : program.steps[0].tasks)
      EXPECT_EQ(task.stage_writes, task.writes()) << "rank " << r << " op " << task.op_index;
  }
  EXPECT_EQ(run_programs(schedule, world, 3, false), "");
  EXPECT_EQ(run_programs(schedule, world, 10, true), "");
}

}  // namespace
// The linear sweep that marks staged writes agrees with its quadratic definition.
TEST(RankProgram, StagingMatchesItsDefinitionOnRandomSteps) {
  std::mt19937 random(12345);
  for (int trial = 0; trial < 300; ++trial) {
    ir::Schedule schedule;
    schedule.units = 12;
    ir::Step step;
    const int ops = 1 + static_cast<int>(random() % 8);
    for (int o = 0; o < ops; ++o) {
      const uint64_t begin = random() % 11;
      const uint64_t end = begin + 1 + random() % (12 - begin);
      const auto kind = random() % 2 ? ir::OpKind::Reduce : ir::OpKind::Broadcast;
      const auto root = static_cast<int32_t>(random() % 3);
      std::vector<int32_t> group{0, 1, 2};
      std::shuffle(group.begin(), group.end(), random);
      group.resize(1 + random() % 3);
      step.ops.push_back(op(kind, begin, end, root, group));
    }
    schedule.steps = {step};
    for (int32_t rank = 0; rank < 3; ++rank) {
      const RankProgram program = lower_rank_program(schedule, rank);
      const auto& tasks = program.steps[0].tasks;
      for (size_t i = 0; i < tasks.size(); ++i) {
        bool expected = false;
        for (size_t j = 0; j < tasks.size(); ++j) {
          const bool overlap = tasks[i].unit_begin < tasks[j].unit_end && tasks[j].unit_begin < tasks[i].unit_end;
          expected |= j != i && tasks[i].writes() && (tasks[j].reads_own() || tasks[j].writes()) && overlap;
        }
        EXPECT_EQ(tasks[i].stage_writes, expected) << "trial " << trial << " rank " << rank << " task " << i;
      }
    }
  }
}

}  // namespace flexplan::codegen
