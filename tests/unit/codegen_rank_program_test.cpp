// The point-to-point lowering (codegen/rank_program.hpp): chain positions, star roots, staged
// writes, where own data is read, and, over random trees and every algorithm, that all ranks'
// programs fit together hop by hop and, run on numbers with the runtime's rules, compute the
// all-reduce.
#include <gtest/gtest.h>

#include "planner_test_trees.hpp"

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "codegen/lowering.hpp"
#include "codegen/rank_program.hpp"
#include "ir/pipeline_form.hpp"
#include "ir/plan_binary.hpp"
#include "ir/plan_slice.hpp"
#include "ir/verify.hpp"
#include "planner/algorithm_table.hpp"
#include "planner/algorithms.hpp"
#include "tests/unit/planner_test_trees.hpp"

namespace flexplan::codegen {
namespace {

// Every algorithm that suits the tree, with pipelined variants of 2, 4 slices.
std::vector<std::string> algorithms_for(const Topology& topo) { return testing::algorithms_for(topo, {2, 4}); }

ir::Op op(ir::OpKind kind, uint64_t begin, uint64_t end, int32_t root, std::vector<int32_t> group) {
  return {kind, begin, end, root, std::move(group)};
}

std::string check_hops(const ir::Schedule& schedule, int world);

ir::Op star(ir::OpKind kind, uint64_t begin, uint64_t end, int32_t root, std::vector<int32_t> group) {
  return {kind, begin, end, root, std::move(group), ir::OpShape::Star};
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
  EXPECT_EQ(zero.steps[0].tasks[0].sources, (std::vector<Link>{{2, 0}}));
  EXPECT_EQ(zero.steps[0].tasks[0].destinations, (std::vector<Link>{{1, 0}}));
  EXPECT_EQ(zero.steps[0].tasks[0].own_position, 1u);  // after the partial sum it receives
  EXPECT_TRUE(zero.steps[0].tasks[0].add_own);
  EXPECT_EQ(zero.steps[0].tasks[1].sources, (std::vector<Link>{{3, 1}}));
  EXPECT_EQ(zero.steps[0].tasks[1].destinations, (std::vector<Link>{{1, 1}}));
  const RankProgram one = lower_rank_program(schedule, 1);
  EXPECT_EQ(one.steps[0].tasks[0].sources, (std::vector<Link>{{0, 0}}));
  EXPECT_FALSE(one.steps[0].tasks[0].sends());
  EXPECT_TRUE(one.steps[0].tasks[0].writes());
  EXPECT_TRUE(lower_rank_program(schedule, 4).steps[0].tasks.empty());  // not involved
}

TEST(RankProgram, RootOutsideTheGroupOnlyReceives) {
  ir::Schedule schedule;
  schedule.units = 2;
  schedule.steps.push_back({ir::Phase::Reduce, 0, {op(ir::OpKind::Reduce, 0, 2, 3, {0, 1})}});
  const RankProgram root = lower_rank_program(schedule, 3);
  ASSERT_EQ(root.steps[0].tasks.size(), 1u);
  EXPECT_EQ(root.steps[0].tasks[0].sources, (std::vector<Link>{{1, 0}}));
  EXPECT_FALSE(root.steps[0].tasks[0].add_own);
  EXPECT_FALSE(root.steps[0].tasks[0].reads_own());
  const RankProgram first = lower_rank_program(schedule, 0);
  EXPECT_EQ(first.steps[0].tasks[0].destinations, (std::vector<Link>{{1, 0}}));
  EXPECT_FALSE(first.steps[0].tasks[0].receives());
}

// A star reduce's root receives from every other member in group order, each message named by
// the op's number and the source's place, in a chunk field left with 2^20 / (places rounded up
// to a power of two) chunks; it places its own data at its place in the group; the members only
// send. A star broadcast's root sends to every other member, all under the op's number.
TEST(RankProgram, StarRootsReceiveFromOrSendToEveryMember) {
  ir::Schedule schedule;
  schedule.units = 4;
  ir::Step step;
  step.ops.push_back(op(ir::OpKind::Reduce, 0, 1, 0, {1, 0}));           // chain 1 -> 0: op #0
  step.ops.push_back(star(ir::OpKind::Reduce, 0, 2, 2, {3, 0, 2, 1}));   // 3, 0, 1 -> 2
  step.ops.push_back(star(ir::OpKind::Broadcast, 2, 4, 1, {0, 1, 3}));   // 1 -> 0, 3
  step.ops.push_back(star(ir::OpKind::Reduce, 2, 4, 3, {1, 2}));         // root outside: 1, 2 -> 3
  schedule.steps.push_back(step);
  const RankProgram two = lower_rank_program(schedule, 2);
  ASSERT_EQ(two.steps[0].tasks.size(), 2u);
  const Task& root = two.steps[0].tasks[0];
  EXPECT_EQ(root.sources, (std::vector<Link>{{3, 1, 0}, {0, 1, 1}, {1, 1, 2}}));
  EXPECT_EQ(root.max_chunks, kMaxChunksPerRange / 4);  // 3 places take 2 bits
  EXPECT_TRUE(root.destinations.empty());
  EXPECT_TRUE(root.add_own);
  EXPECT_EQ(root.own_position, 2u);  // 3, 0, own, 1
  EXPECT_TRUE(root.writes());
  EXPECT_TRUE(root.reads_own());
  EXPECT_EQ(two.steps[0].tasks[1].destinations, (std::vector<Link>{{3, 3, 1}}));  // op #3, after 1
  EXPECT_EQ(two.steps[0].tasks[1].max_chunks, kMaxChunksPerRange / 2);
  const RankProgram zero = lower_rank_program(schedule, 0);
  ASSERT_EQ(zero.steps[0].tasks.size(), 3u);
  EXPECT_EQ(zero.steps[0].tasks[1].destinations, (std::vector<Link>{{2, 1, 1}}));  // the root's second source
  EXPECT_EQ(zero.steps[0].tasks[1].max_chunks, kMaxChunksPerRange / 4);          // as at the root
  EXPECT_EQ(zero.steps[0].tasks[2].sources, (std::vector<Link>{{1, 2, 0}}));
  EXPECT_EQ(zero.steps[0].tasks[2].max_chunks, kMaxChunksPerRange);
  EXPECT_TRUE(zero.steps[0].tasks[2].writes());
  const RankProgram one = lower_rank_program(schedule, 1);
  ASSERT_EQ(one.steps[0].tasks.size(), 4u);
  const Task& broadcaster = one.steps[0].tasks[2];
  EXPECT_TRUE(broadcaster.sources.empty());
  EXPECT_EQ(broadcaster.destinations, (std::vector<Link>{{0, 2, 0}, {3, 2, 0}}));
  EXPECT_TRUE(broadcaster.reads_own());
  EXPECT_FALSE(broadcaster.writes());
  const RankProgram three = lower_rank_program(schedule, 3);
  const Task& outside = three.steps[0].tasks[2];
  EXPECT_EQ(outside.sources, (std::vector<Link>{{1, 3, 0}, {2, 3, 1}}));
  EXPECT_FALSE(outside.add_own);
  EXPECT_FALSE(outside.reads_own());
  EXPECT_EQ(check_hops(schedule, 4), "");  // not an all-reduce: run_programs does not apply
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
// copy-ins, then its ops one at a time (in op order, or reversed), each member once all its
// sources sent (a chain link by link, a star's members before their root), a task reading its own
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
      // Plain variables, not a structured binding: clang 14 cannot capture one in a lambda.
      const auto range = elements(the_op.begin, the_op.end);
      const auto b = range.first, e = range.second;
      const std::string where = "step " + std::to_string(s) + " op " + std::to_string(o) + ": ";
      const auto own = [&](int r, const Task& task) {
        const auto& buffer = task.own_from_send ? send[r] : recv[r];
        return std::vector<Value>(buffer.begin() + b, buffer.begin() + e);
      };
      std::map<int, const Task*> members;
      for (int r = 0; r < world; ++r) {
        const auto it = task_of.find({static_cast<uint32_t>(o), r});
        if (it != task_of.end()) members[r] = it->second;
      }
      // Each member runs once all its sources sent: what each sent, by rank.
      std::map<int, std::vector<Value>> sent;
      std::map<int, bool> ran;
      for (size_t rounds = 0; ran.size() < members.size(); ++rounds) {
        if (rounds > members.size()) return where + "members wait on each other or on a non-member";
        for (const auto& member : members) {
          const int r = member.first;
          const Task* task = member.second;
          if (ran.count(r)) continue;
          bool ready = true;
          for (const Link& source : task->sources) ready &= sent.count(source.rank) > 0;
          if (!ready) continue;
          for (const Link& source : task->sources) {
            const auto& theirs = members.at(source.rank)->destinations;
            if (std::find_if(theirs.begin(), theirs.end(), [&](const Link& l) { return l.rank == r; }) == theirs.end())
              return where + "rank " + std::to_string(r) + " receives from rank " + std::to_string(source.rank) +
                     ", which does not send to it";
          }
          std::vector<Value> value;
          if (!task->receives()) {
            value = own(r, *task);
          } else if (!task->reduce) {
            if (task->sources.size() != 1) return where + "a broadcast member with several sources";
            value = sent[task->sources[0].rank];
          } else {
            value.assign(e - b, Value{0, 0});
            const auto add = [&](const std::vector<Value>& part) {
              for (size_t i = 0; i < value.size(); ++i) {
                value[i].sum += part[i].sum;
                value[i].count += part[i].count;
              }
            };
            for (const Link& source : task->sources) add(sent[source.rank]);
            if (task->add_own) add(own(r, *task));
          }
          if (task->writes()) {
            if (task->stage_writes) {
              staged.push_back({r, b, value});
            } else {
              std::copy(value.begin(), value.end(), recv[r].begin() + b);
            }
          }
          for (const Link& destination : task->destinations)
            if (!members.count(destination.rank)) return where + "sends to a non-member";
          sent[r] = std::move(value);
          ran[r] = true;
        }
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

// Every hop that lower_op gives appears once at its sender (as a destination) and once at its
// receiver (as a source), in the same step and op, and nowhere else; both name it alike (the
// op's number in the schedule, a star reduce's source's place, the chunk limit), and a star root
// lists its sources in group order.
std::string check_hops(const ir::Schedule& schedule, int world) {
  std::map<std::tuple<size_t, uint32_t, int>, const Task*> task_of;
  std::vector<RankProgram> programs;
  for (int r = 0; r < world; ++r) programs.push_back(lower_rank_program(schedule, r));
  size_t tasks = 0, links = 0;
  for (int r = 0; r < world; ++r)
    for (size_t s = 0; s < schedule.steps.size(); ++s)
      for (const Task& task : programs[r].steps[s].tasks) {
        task_of[{s, task.op_index, r}] = &task;
        ++tasks;
        links += task.sources.size() + task.destinations.size();
      }
  const auto find = [](const std::vector<Link>& list, int32_t rank) {
    return std::find_if(list.begin(), list.end(), [&](const Link& l) { return l.rank == rank; });
  };
  size_t members = 0, hops_total = 0;
  for (size_t s = 0; s < schedule.steps.size(); ++s)
    for (uint32_t o = 0; o < schedule.steps[s].ops.size(); ++o) {
      const auto hops = lower_op(schedule.steps[s].ops[o]);
      std::vector<int32_t> ranks;
      for (const Hop& hop : hops) ranks.insert(ranks.end(), {hop.src, hop.dst});
      std::sort(ranks.begin(), ranks.end());
      members += static_cast<size_t>(std::unique(ranks.begin(), ranks.end()) - ranks.begin());
      hops_total += hops.size();
      std::map<int32_t, size_t> received;  // by receiver: its sources so far, in hop order
      for (const Hop& hop : hops) {
        const std::string what = "step " + std::to_string(s) + " op " + std::to_string(o) + ": hop " +
                                 std::to_string(hop.src) + " -> " + std::to_string(hop.dst);
        const auto from = task_of.find({s, o, hop.src});
        const auto to = task_of.find({s, o, hop.dst});
        if (from == task_of.end() || to == task_of.end()) return what + " has no task";
        const auto out = find(from->second->destinations, hop.dst);
        const auto in = find(to->second->sources, hop.src);
        if (out == from->second->destinations.end() || in == to->second->sources.end() ||
            to->second->add_own != hop.dst_contributes || out->message != in->message || out->source != in->source ||
            from->second->max_chunks != to->second->max_chunks)
          return what + " not lowered";
        if (static_cast<size_t>(in - to->second->sources.begin()) != received[hop.dst]++)
          return what + ": sources out of hop order";
      }
    }
  if (tasks != members) return std::to_string(tasks) + " tasks for " + std::to_string(members) + " op members";
  if (links != 2 * hops_total) return std::to_string(links) + " links for " + std::to_string(hops_total) + " hops";
  // The runtime's tags (runtime/tag.hpp): a message is the op's number, ops counted in (step,
  // op) order, and a star reduce's source place, within the chunk field's 20 bits with the
  // task's chunks; no rank receives two messages under one name.
  for (int r = 0; r < world; ++r) {
    std::set<std::pair<uint64_t, uint32_t>> names;
    uint64_t ops_before = 0;
    for (size_t s = 0; s < programs[r].steps.size(); ++s) {
      for (const Task& task : programs[r].steps[s].tasks) {
        const uint64_t number = ops_before + task.op_index;
        const ir::Op& op = schedule.steps[s].ops[task.op_index];
        const bool star_reduce = op.kind == ir::OpKind::Reduce && op.shape == ir::OpShape::Star;
        const uint64_t slots = star_reduce ? star_source_slots(lower_op(op).size()) : 1;
        if (task.max_chunks * slots != kMaxChunksPerRange)
          return "rank " + std::to_string(r) + ": chunk limit " + std::to_string(task.max_chunks) + " with " +
                 std::to_string(slots) + " source slots";
        for (const auto* links : {&task.sources, &task.destinations})
          for (const Link& link : *links)
            if (link.message != number || link.source >= slots)
              return "rank " + std::to_string(r) + ": step " + std::to_string(s) + " op " +
                     std::to_string(task.op_index) + " named " + std::to_string(link.message) + "." +
                     std::to_string(link.source) + ", expected op number " + std::to_string(number);
        for (size_t i = 0; i < task.sources.size(); ++i) {
          if (star_reduce && task.sources[i].source != i)
            return "rank " + std::to_string(r) + ": source places out of order";
          if (!names.insert({task.sources[i].message, task.sources[i].source}).second)
            return "rank " + std::to_string(r) + ": two receives named " + std::to_string(task.sources[i].message);
        }
      }
      ops_before += schedule.steps[s].ops.size();
    }
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
  // The same as stars: each root writes what it sends to the other roots.
  for (ir::Op& each : schedule.steps.edit()[0].ops) each.shape = ir::OpShape::Star;
  for (int r = 0; r < world; ++r) {
    const RankProgram program = lower_rank_program(schedule, r);
    for (const Task& task : program.steps[0].tasks)
      EXPECT_EQ(task.stage_writes, task.writes()) << "star: rank " << r << " op " << task.op_index;
  }
  EXPECT_EQ(check_hops(schedule, world), "");
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
      if (random() % 2) step.ops.back().shape = ir::OpShape::Star;
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

namespace flexplan::codegen {
namespace {

// A pipeline held compact lowers, rank by rank, to the very program of its expansion (ranges,
// op indices, receive numbering, staging, copies), for every pipelining algorithm on random
// trees.
TEST(RankProgram, CompactPipelinesLowerAsTheirExpansion) {
  int compared = 0;
  testing::for_each_random_pipeline(20261124, 12, 24, [&](const Topology& topo, const ir::Schedule& base,
                                                         uint32_t slices, int tree) {
    const ir::Schedule compact = ir::compact_pipeline(base, slices);
    const ir::Schedule whole = ir::expand_pipeline(base, slices);
    for (int32_t rank = 0; rank < topo.num_learners(); ++rank) {
      EXPECT_EQ(lower_rank_program(compact, rank), lower_rank_program(whole, rank))
          << whole.algorithm << " tree " << tree << " rank " << rank;
      ++compared;
    }
  });
  EXPECT_GT(compared, 500);
}

}  // namespace
}  // namespace flexplan::codegen

namespace flexplan::codegen {
namespace {

// A chain's hops are the consecutive pairs of chain_order, a star's go to or from its root in
// group order; append_hops appends exactly lower_op's hops. Random ops: roots in and out of
// the group, groups of one to six, both kinds and shapes.
TEST(Lowering, HopsFollowTheChainOrderAndAppendAlike) {
  std::mt19937 rng(20261126);
  int chains = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    std::vector<int32_t> group(1 + rng() % 6);
    for (size_t i = 0; i < group.size(); ++i) group[i] = static_cast<int32_t>(i);
    std::shuffle(group.begin(), group.end(), rng);
    const auto root = static_cast<int32_t>(rng() % (group.size() + 1));  // == size: outside
    const auto kind = rng() % 2 ? ir::OpKind::Reduce : ir::OpKind::Broadcast;
    const auto shape = rng() % 2 ? ir::OpShape::Chain : ir::OpShape::Star;
    const ir::Op op{kind, 0, 8, root, group, shape};
    const auto hops = lower_op(op);
    std::vector<Hop> appended{{-7, -7, false}};
    append_hops(op, appended);
    ASSERT_EQ(appended.size(), hops.size() + 1);
    for (size_t h = 0; h < hops.size(); ++h) {
      EXPECT_EQ(appended[h + 1].src, hops[h].src);
      EXPECT_EQ(appended[h + 1].dst, hops[h].dst);
      EXPECT_EQ(appended[h + 1].dst_contributes, hops[h].dst_contributes);
    }
    if (shape == ir::OpShape::Star) continue;
    ++chains;
    const auto order = chain_order(op);
    ASSERT_EQ(hops.size(), order.size() - 1);
    for (size_t h = 0; h < hops.size(); ++h) {
      EXPECT_EQ(hops[h].src, order[h]);
      EXPECT_EQ(hops[h].dst, order[h + 1]);
      const bool into_root = order[h + 1] == root;
      EXPECT_EQ(hops[h].dst_contributes, kind == ir::OpKind::Reduce && (!into_root || op.root_in_group()));
    }
  }
  EXPECT_GT(chains, 800);
}

}  // namespace
}  // namespace flexplan::codegen

namespace flexplan::codegen {
namespace {

// The dependency lists of a hand-made program: rank 0 reads [0, 2) and [2, 4) in step 0, writes
// [0, 2) and reads [2, 4) in step 1, and reads and writes [0, 4) in step 2.
TEST(LinkedTasks, HazardsOfAHandMadeProgram) {
  ir::Schedule schedule;
  schedule.units = 4;
  ir::Step steps[3];
  steps[0].ops.push_back(op(ir::OpKind::Reduce, 0, 2, 1, {0, 1}));     // 0 -> 1: reads
  steps[0].ops.push_back(op(ir::OpKind::Broadcast, 2, 4, 0, {0, 1}));  // 0 -> 1: reads
  steps[1].ops.push_back(op(ir::OpKind::Broadcast, 0, 2, 1, {1, 0}));  // 1 -> 0: writes
  steps[1].ops.push_back(op(ir::OpKind::Reduce, 2, 4, 1, {0, 1}));     // 0 -> 1: reads
  steps[2].ops.push_back(op(ir::OpKind::Reduce, 0, 4, 0, {1, 0}));     // 1 -> 0: both
  for (const ir::Step& step : steps) schedule.steps.push_back(step);
  RankProgram zero = lower_rank_program(schedule, 0);
  link_tasks(zero);
  ASSERT_EQ(zero.steps[1].tasks.size(), 2u);
  ASSERT_TRUE(zero.steps[1].tasks[0].writes());
  ASSERT_TRUE(zero.steps[2].tasks[0].writes() && zero.steps[2].tasks[0].reads_own());
  EXPECT_TRUE(zero.steps[0].tasks[0].after.empty());
  EXPECT_TRUE(zero.steps[0].tasks[1].after.empty());
  // Write after read: the broadcast lands where step 0's reduce was sending from.
  EXPECT_EQ(zero.steps[1].tasks[0].after, (std::vector<TaskRef>{{0, 0}}));
  EXPECT_TRUE(zero.steps[1].tasks[1].after.empty());  // read after read: no wait
  // Read and write after: the writer of [0, 2) (its reader of step 0 came before it) and every
  // reader of [2, 4), which nobody wrote.
  EXPECT_EQ(zero.steps[2].tasks[0].after, (std::vector<TaskRef>{{0, 1}, {1, 0}, {1, 1}}));
  EXPECT_EQ(zero.steps[0].tasks[0].wakes, (std::vector<TaskRef>{{1, 0}}));
  EXPECT_EQ(zero.steps[0].tasks[1].wakes, (std::vector<TaskRef>{{2, 0}}));
  EXPECT_EQ(zero.steps[1].tasks[1].wakes, (std::vector<TaskRef>{{2, 0}}));
  // Rank 1 receives step 0's two ops (writes [0, 4)) and sends [0, 2) at step 1: waits for the
  // reduce's root it was.
  RankProgram one = lower_rank_program(schedule, 1);
  link_tasks(one);
  ASSERT_EQ(one.steps[1].tasks.size(), 2u);
  EXPECT_EQ(one.steps[1].tasks[0].after, (std::vector<TaskRef>{{0, 0}}));
}

// Over every pipelining algorithm on random trees, with staged writes as the runtime treats them
// (a task that waits for a staged writer waits for its whole step): every pair of tasks of
// different steps of a rank that touch a common unit, one of them writing it, is ordered by the
// dependencies, directly or through others; no task waits for one of its own step or a later one.
TEST(LinkedTasks, EveryHazardIsOrdered) {
  size_t hazards = 0, direct = 0;
  testing::for_each_random_pipeline(20261129, 6, 16, [&](const Topology& topo, const ir::Schedule& base,
                                                         uint32_t slices, int tree) {
    const ir::Schedule whole = ir::expand_pipeline(base, slices);
    for (int32_t rank = 0; rank < topo.num_learners(); ++rank) {
      RankProgram program = lower_rank_program(whole, rank);
      link_tasks(program);
      // Flat task numbers, and what each task waits for through the chain of waits.
      std::vector<size_t> first(program.steps.size() + 1, 0);
      for (size_t s = 0; s < program.steps.size(); ++s) first[s + 1] = first[s] + program.steps[s].tasks.size();
      const size_t total = first.back();
      const size_t words = (total + 63) / 64;
      std::vector<std::vector<uint64_t>> waits(total, std::vector<uint64_t>(words, 0));
      const auto waits_for = [&](size_t b, size_t a) { return (waits[b][a / 64] >> (a % 64)) & 1; };
      for (size_t s = 0; s < program.steps.size(); ++s) {
        for (size_t k = 0; k < program.steps[s].tasks.size(); ++k) {
          const Task& task = program.steps[s].tasks[k];
          auto& mine = waits[first[s] + k];
          for (const TaskRef& before : task.after) {
            ASSERT_LT(before.step, s) << whole.algorithm << " tree " << tree << " rank " << rank;
            const Task& other = program.steps[before.step].tasks[before.task];
            EXPECT_NE(std::find(other.wakes.begin(), other.wakes.end(), TaskRef{uint32_t(s), uint32_t(k)}),
                      other.wakes.end());
            // A staged writer finishes with its whole step.
            const size_t from = other.stage_writes ? first[before.step] : first[before.step] + before.task;
            const size_t to = other.stage_writes ? first[before.step + 1] : from + 1;
            for (size_t w = from; w < to; ++w) {
              mine[w / 64] |= uint64_t{1} << (w % 64);
              for (size_t x = 0; x < words; ++x) mine[x] |= waits[w][x];
            }
          }
        }
      }
      for (size_t sb = 0; sb < program.steps.size(); ++sb) {
        for (size_t kb = 0; kb < program.steps[sb].tasks.size(); ++kb) {
          const Task& b = program.steps[sb].tasks[kb];
          for (size_t sa = 0; sa < sb; ++sa) {
            for (size_t ka = 0; ka < program.steps[sa].tasks.size(); ++ka) {
              const Task& a = program.steps[sa].tasks[ka];
              const bool overlap = a.unit_begin < b.unit_end && b.unit_begin < a.unit_end;
              const bool hazard = overlap && ((a.writes() && (b.reads_own() || b.writes())) ||
                                              (a.reads_own() && b.writes()));
              if (!hazard) continue;
              ++hazards;
              direct += std::find(b.after.begin(), b.after.end(), TaskRef{uint32_t(sa), uint32_t(ka)}) != b.after.end();
              EXPECT_TRUE(waits_for(first[sb] + kb, first[sa] + ka))
                  << whole.algorithm << " tree " << tree << " rank " << rank << ": step " << sb << " task " << kb
                  << " does not wait for step " << sa << " task " << ka;
            }
          }
        }
      }
    }
  });
  EXPECT_GT(hazards, 1000u);
  EXPECT_LT(direct, hazards);  // some are ordered through others: the lists are not every pair
}

}  // namespace
}  // namespace flexplan::codegen

namespace flexplan::codegen {
namespace {

// A rank's part of plan.bin alone (ir::read_rank_slice: its ops and every step's op count)
// lowers to the very program the whole schedule gives, message numbers included, so a rank can
// run from its part: for schedules held whole, pipelines held compact, and a schedule that
// names another's steps, on random trees with every pipelining algorithm (star ones included).
TEST(RankProgram, RankSlicesLowerAsTheWholeSchedule) {
  int compared = 0;
  testing::for_each_random_pipeline(20261139, 8, 20, [&](const Topology& topo, const ir::Schedule& base,
                                                         uint32_t slices, int tree) {
    ir::Plan plan;
    plan.world_size = topo.num_learners();
    ir::Schedule whole = base, again = base;
    whole.max_bytes = 100;
    again.min_bytes = 100;
    again.max_bytes = 1000;  // the same steps: written once, named by the second
    ir::Schedule compact = ir::compact_pipeline(base, slices);
    compact.min_bytes = 1000;
    plan.schedules = {whole, again, compact};
    const std::vector<uint8_t> bytes = ir::encode_plan(plan);
    for (int32_t rank = 0; rank < plan.world_size; ++rank) {
      const ir::RankSlice slice = ir::read_rank_slice(bytes, "plan.bin", rank);
      for (size_t s = 0; s < plan.schedules.size(); ++s) {
        EXPECT_EQ(lower_rank_program(slice, s), lower_rank_program(plan.schedules[s], rank))
            << plan.schedules[s].algorithm << " tree " << tree << " rank " << rank << " schedule " << s;
        ++compared;
      }
    }
  });
  EXPECT_GT(compared, 500);
}

}  // namespace
}  // namespace flexplan::codegen
