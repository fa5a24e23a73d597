// MSCCL export of the collectives beside all-reduce: every all-gather and reduce-scatter
// algorithm on random trees exports with the executors' buffers (coll, i_chunks, o_chunks,
// nchunksperloop counting every rank's data) and, run on host buffers in place and out of
// place, meets its contract; the checker catches files that break the contract or model the
// in-place layout wrongly; broadcast, reduce and uneven explicit shards are refused, saying why.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "codegen/msccl.hpp"
#include "ir/collective_contract.hpp"
#include "ir/pipeline_form.hpp"
#include "ir/verify.hpp"
#include "planner/collective_planner.hpp"
#include "tests/unit/planner_test_trees.hpp"

namespace flexplan::codegen::msccl {
namespace {

ir::Plan single(const Topology& topo, ir::Collective collective, const std::string& algorithm, int32_t root = 0) {
  ir::Plan plan;
  plan.world_size = topo.num_learners();
  plan.topology_name = topo.name();
  plan.topology_hash = topo.hash_hex();
  plan.schedules.push_back(plan_collective_algorithm(topo, collective, algorithm, root));
  return ir::materialize(plan);
}

// Exports, writes, reads back, loads and runs; "" on success, "refused: ..." when the export
// refuses, else what failed.
std::string round_trip(const ir::Plan& plan, bool rccl, uint64_t chunks = 0) {
  ExportOptions options;
  options.limits.rccl = rccl;
  options.chunks = chunks;
  Export exported;
  try {
    exported = export_schedule(plan, 0, options);
  } catch (const ExportError& e) {
    return std::string("refused: ") + e.what();
  }
  Algorithm read;
  try {
    read = parse_xml(to_xml(exported.algorithm));
    check_loadable(read, options.limits);
  } catch (const FormatError& e) {
    return std::string("unreadable: ") + e.what();
  }
  if (!(read == exported.algorithm)) return "reads back different";
  return simulate(read);
}

constexpr ir::Collective kSharded[] = {ir::Collective::AllGather, ir::Collective::ReduceScatter};

// The schedule with every unit cut into `m` and every op into two halves: the same collective
// over shards of m times the units, with op boundaries inside the shards.
ir::Plan scaled(ir::Plan plan, uint64_t m) {
  ir::Schedule& schedule = plan.schedules[0];
  schedule.units *= m;
  for (ir::Step& step : schedule.steps.edit()) {
    std::vector<ir::Op> halves;
    for (ir::Op op : step.ops) {
      op.begin *= m, op.end *= m;
      ir::Op upper = op;
      op.end = upper.begin = (op.begin + op.end) / 2;
      for (const ir::Op& half : {op, upper})
        if (half.begin < half.end) halves.push_back(half);
    }
    step.ops = std::move(halves);
  }
  return plan;
}

// One step: every rank's shard of `units` (the default shards, uneven where P does not divide
// the units) goes to (all-gather) or is summed from (reduce-scatter) every rank in one chain.
ir::Plan direct(ir::Collective collective, int32_t world, uint64_t units) {
  ir::Plan plan;
  plan.world_size = world;
  ir::Schedule schedule;
  schedule.algorithm = "direct";
  schedule.collective = collective;
  schedule.units = units;
  ir::Step step;
  const bool gather = collective == ir::Collective::AllGather;
  step.phase = gather ? ir::Phase::AllGather : ir::Phase::ReduceScatter;
  for (int32_t r = 0; r < world; ++r) {
    const ir::UnitRange shard = ir::shard_of(schedule, world, r);
    if (shard.begin == shard.end) continue;
    ir::Op op;
    op.kind = gather ? ir::OpKind::Broadcast : ir::OpKind::Reduce;
    op.begin = shard.begin, op.end = shard.end, op.root = r;
    for (int32_t i = 0; i < world; ++i) op.group.push_back((r + i) % world);
    step.ops.push_back(op);
  }
  schedule.steps.edit().push_back(step);
  plan.schedules.push_back(schedule);
  return plan;
}

TEST(MscclCollectives, PaperFig2AllGatherAndReduceScatterCarryTheExecutorsBuffers) {
  const Topology topo = load_topology(std::string(FLEXPLAN_SOURCE_DIR) + "/topologies/two-machines-2+3.json");
  for (const ir::Collective collective : kSharded) {
    for (const std::string& name : collective_algorithm_names(collective)) {
      const ir::Plan plan = single(topo, collective, name);
      const Export e = export_schedule(plan, 0);
      const Algorithm& a = e.algorithm;
      const bool gather = collective == ir::Collective::AllGather;
      EXPECT_EQ(a.collective, gather ? "allgather" : "reducescatter") << name;
      EXPECT_TRUE(a.in_place && a.out_of_place);
      ASSERT_EQ(a.chunks_per_loop % 5, 0) << name;
      const int32_t k = a.chunks_per_loop / 5;
      EXPECT_EQ(e.chunking.shard_chunks, k);
      for (const Gpu& gpu : a.gpus) {
        EXPECT_EQ(gpu.input_chunks, gather ? k : a.chunks_per_loop) << name;
        EXPECT_EQ(gpu.output_chunks, gather ? a.chunks_per_loop : k) << name;
      }
      EXPECT_NE(to_xml(a).find(gather ? "coll=\"allgather\"" : "coll=\"reducescatter\""), std::string::npos);
      for (const bool rccl : {false, true})
        EXPECT_EQ(round_trip(plan, rccl), "") << ir::to_string(collective) << " " << name << (rccl ? " rccl" : "");
    }
  }
}

TEST(MscclCollectives, EveryAllGatherAndReduceScatterAlgorithmOnRandomTrees) {
  testing::RandomTrees trees(0x5C47);
  int exported = 0;
  for (int t = 0; t < 40; ++t) {
    const Topology topo = trees.next(16);
    for (const ir::Collective collective : kSharded)
      for (const std::string& name : collective_algorithm_names(collective)) {
        const ir::Plan plan = single(topo, collective, name);
        ASSERT_NO_THROW(ir::verify_plan(plan)) << topo.name() << " " << name;
        const ir::Schedule& schedule = plan.schedules[0];
        for (const bool rccl : {false, true}) {
          const std::string result = round_trip(plan, rccl);
          // Refusals name an executor limit; nothing else may go wrong.
          if (result.rfind("refused: ", 0) == 0) {
            EXPECT_NE(result.find("cannot fit"), std::string::npos) << topo.name() << " " << name << ": " << result;
            continue;
          }
          EXPECT_EQ(result, "") << topo.name() << " " << ir::to_string(collective) << " " << name
                                << (rccl ? " rccl" : "") << " units " << schedule.units;
          ++exported;
        }
      }
  }
  EXPECT_GT(exported, 300);
}

// Where P does not divide the units the default shards differ by a unit; each still becomes k
// chunks (not exact), and the file meets the contract. Fewer units than ranks leave a rank an
// empty shard: refused.
TEST(MscclCollectives, UnevenDefaultShardsExportAndEmptyShardsAreRefused) {
  for (const int32_t p : {2, 3, 5, 8}) {
    const auto world = static_cast<uint64_t>(p);
    for (const ir::Collective collective : kSharded) {
      for (const uint64_t units : {world + 1, 2 * world - 1, 3 * world + 2, 5 * world}) {
        const ir::Plan plan = direct(collective, p, units);
        ASSERT_NO_THROW(ir::verify_plan(plan)) << p << " ranks, " << units << " units";
        const Export e = export_schedule(plan, 0);
        EXPECT_EQ(e.chunking.exact, units % world == 0) << p << " ranks, " << units << " units";
        EXPECT_EQ(e.chunking.largest_shard_units, (units + world - 1) / world);
        EXPECT_EQ(round_trip(plan, false), "") << ir::to_string(collective) << " " << p << " ranks, " << units << " units";
        EXPECT_EQ(round_trip(plan, true), "") << ir::to_string(collective) << " " << p << " ranks, " << units << " units";
      }
      const ir::Plan few = direct(collective, p, world - 1);
      ASSERT_NO_THROW(ir::verify_plan(few));
      const std::string refused = round_trip(few, false);
      EXPECT_NE(refused.find("rank 0's shard is empty"), std::string::npos) << refused;
    }
  }
}

// nchunksperloop other than the units: shards of several units share chunks, or units spread
// over several chunks, and the result is still the contract.
TEST(MscclCollectives, ChunkCountsOtherThanTheUnitsStillMeetTheContract) {
  testing::RandomTrees trees(0xC4);
  int rounded = 0;
  for (int t = 0; t < 20; ++t) {
    const Topology topo = trees.next(10);
    const auto p = static_cast<uint64_t>(topo.num_learners());
    for (const ir::Collective collective : kSharded) {
      // Shards of two units each: k = 1, 3 and 7 chunks per shard round.
      const std::string name = collective_algorithm_names(collective).back();
      const ir::Plan plan = scaled(single(topo, collective, name), 2);
      ASSERT_NO_THROW(ir::verify_plan(plan));
      for (const uint64_t per_rank : {uint64_t{1}, uint64_t{3}, uint64_t{7}}) {
        ExportOptions options;
        options.chunks = per_rank * p;
        const Export e = export_schedule(plan, 0, options);
        EXPECT_EQ(e.chunking.shard_chunks, static_cast<int32_t>(per_rank));
        EXPECT_LE(e.chunking.largest_shift, 0.5 + 1e-9);
        rounded += !e.chunking.exact;
        EXPECT_EQ(round_trip(plan, false, per_rank * p), "") << topo.name() << " " << name << " k " << per_rank;
        EXPECT_EQ(round_trip(plan, true, per_rank * p), "") << topo.name() << " " << name << " k " << per_rank;
      }
      ExportOptions odd;
      odd.chunks = p + 1;
      try {
        export_schedule(plan, 0, odd);
        ADD_FAILURE() << "nchunksperloop " << p + 1 << " accepted for " << p << " ranks";
      } catch (const ExportError& e) {
        EXPECT_NE(std::string(e.what()).find("multiple of the"), std::string::npos) << e.what();
      }
    }
  }
  EXPECT_GT(rounded, 10);
}

TEST(MscclCollectives, BroadcastAndReduceAreRefusedSayingWhy) {
  const Topology topo = testing::machines({2, 3});
  for (const ir::Collective collective : {ir::Collective::Broadcast, ir::Collective::Reduce})
    for (const std::string& name : collective_algorithm_names(collective)) {
      const ir::Plan plan = single(topo, collective, name, 3);
      try {
        export_schedule(plan, 0);
        ADD_FAILURE() << ir::to_string(collective) << " " << name << " exported";
      } catch (const ExportError& e) {
        const std::string what = e.what();
        EXPECT_NE(what.find(std::string(ir::to_string(collective)) + " from root 3"), std::string::npos) << what;
        EXPECT_NE(what.find("names no root"), std::string::npos) << what;
      }
    }
}

// Two ranks, shards [0, 2) and [2, 10): a valid all-gather of uneven shards, which MSCCL's
// allgather (one count for every rank) cannot express. The same plan with the equal shards
// spelled out exports.
ir::Plan swap_plan(ir::Collective collective, std::vector<ir::UnitRange> shards) {
  ir::Plan plan;
  plan.world_size = 2;
  ir::Schedule swap;
  swap.algorithm = "swap";
  swap.collective = collective;
  swap.units = 10;
  swap.shards = std::move(shards);
  ir::Step step;
  const bool gather = collective == ir::Collective::AllGather;
  step.phase = gather ? ir::Phase::AllGather : ir::Phase::ReduceScatter;
  ir::Op a;
  a.kind = gather ? ir::OpKind::Broadcast : ir::OpKind::Reduce;
  a.begin = 0, a.end = swap.shards[0].end, a.root = 0, a.group = {0, 1};
  ir::Op b = a;
  b.begin = swap.shards[1].begin, b.end = 10, b.root = 1, b.group = {1, 0};
  step.ops = {a, b};
  swap.steps.edit().push_back(step);
  plan.schedules.push_back(swap);
  return plan;
}

TEST(MscclCollectives, ExplicitShardsExportOnlyWhenEqualAndInRankOrder) {
  for (const ir::Collective collective : kSharded) {
    const ir::Plan equal = swap_plan(collective, {{0, 5}, {5, 10}});
    ASSERT_NO_THROW(ir::verify_plan(equal));
    EXPECT_EQ(round_trip(equal, false), "");
    EXPECT_EQ(round_trip(equal, true), "");
    const ir::Plan uneven = swap_plan(collective, {{0, 2}, {2, 10}});
    ASSERT_NO_THROW(ir::verify_plan(uneven));
    const std::string result = round_trip(uneven, false);
    EXPECT_NE(result.find("refused: "), std::string::npos) << result;
    EXPECT_NE(result.find("rank 0 holds [0,2), the equal split [0,5)"), std::string::npos) << result;
    EXPECT_NE(result.find("same count"), std::string::npos) << result;
  }
}

// Hand-written files on two gpus, nchunksperloop 4 (two chunks per rank's shard).
Algorithm two_gpus(const std::string& collective) {
  Algorithm a;
  a.name = "hand";
  a.collective = collective;
  a.chunks_per_loop = 4;
  a.world = 2;
  const bool gather = collective == "allgather";
  for (int32_t g = 0; g < 2; ++g) {
    Gpu gpu;
    gpu.id = g;
    gpu.input_chunks = gather ? 2 : 4;
    gpu.output_chunks = gather ? 4 : 2;
    ThreadBlock peer;
    peer.id = 0, peer.send = 1 - g, peer.recv = 1 - g;
    const int32_t mine = 2 * g, theirs = 2 * (1 - g);
    // Gpu 0 sends first, gpu 1 receives first (transfers are rendezvous: two sends facing
    // each other would wait forever).
    std::vector<Step> sends, receives;
    if (gather) {
      // Send both input chunks, receive the peer's into its place; a local threadblock copies
      // the own shard into place (onto itself in place) after the sends read it.
      sends.push_back({StepType::Send, Buffer::Input, 0, Buffer::Output, -1, 1});
      sends.push_back({StepType::Send, Buffer::Input, 1, Buffer::Output, -1, 1});
      sends.back().has_dependents = true;
      receives.push_back({StepType::Recv, Buffer::Input, -1, Buffer::Output, theirs, 1});
      receives.push_back({StepType::Recv, Buffer::Input, -1, Buffer::Output, theirs + 1, 1});
    } else {
      // Send the peer's shard of the input, receive the peer's part of the own shard and add
      // the own input to it.
      sends.push_back({StepType::Send, Buffer::Input, theirs, Buffer::Output, -1, 2});
      receives.push_back({StepType::RecvReduceCopy, Buffer::Input, mine, Buffer::Output, 0, 2});
    }
    peer.steps = g == 0 ? sends : receives;
    const std::vector<Step>& then = g == 0 ? receives : sends;
    peer.steps.insert(peer.steps.end(), then.begin(), then.end());
    gpu.threadblocks = {peer};
    if (gather) {
      ThreadBlock local;
      local.id = 1;
      const int32_t last_send = g == 0 ? 1 : 3;
      local.steps.push_back({StepType::Copy, Buffer::Input, 0, Buffer::Output, mine, 2, 0, last_send});
      gpu.threadblocks.push_back(local);
    }
    a.gpus.push_back(gpu);
  }
  return a;
}

TEST(MscclCollectives, CheckerRunsHandWrittenFilesAgainstTheContract) {
  EXPECT_EQ(simulate(two_gpus("allgather")), "");
  EXPECT_EQ(simulate(two_gpus("reducescatter")), "");
  // The checker does not take one collective's file for another.
  Algorithm renamed = two_gpus("allgather");
  renamed.collective = "reducescatter";
  EXPECT_NE(simulate(renamed), "");
  EXPECT_NE(simulate_allreduce(two_gpus("allgather")), "");

  // Gpu 0 sends its chunks in the wrong order: gpu 1 holds them swapped.
  Algorithm swapped = two_gpus("allgather");
  std::swap(swapped.gpus[0].threadblocks[0].steps[0].src_offset, swapped.gpus[0].threadblocks[0].steps[1].src_offset);
  EXPECT_NE(simulate(swapped).find("gpu 1 output chunk 0 should be a copy of gpu 0's input chunk 0"),
            std::string::npos)
      << simulate(swapped);

  // A reduce-scatter adding the wrong own chunk: every contribution counted once, the wrong ones.
  Algorithm wrong = two_gpus("reducescatter");
  ASSERT_EQ(wrong.gpus[1].threadblocks[0].steps[0].type, StepType::RecvReduceCopy);
  wrong.gpus[1].threadblocks[0].steps[0].src_offset = 0;
  EXPECT_NE(simulate(wrong).find("2 of 2 contributions (but the wrong ones) on output chunk 0"), std::string::npos)
      << simulate(wrong);

  // Without the copy of the own shard, an all-gather is right in place only (the input is the
  // gpu's slice of the output there): the checker models the executors' in-place layout.
  Algorithm no_copy = two_gpus("allgather");
  for (Gpu& gpu : no_copy.gpus) {
    gpu.threadblocks.pop_back();
    for (Step& step : gpu.threadblocks[0].steps) step.has_dependents = false;
  }
  const std::string out_of_place = simulate(no_copy);
  EXPECT_NE(out_of_place.find("out of place: gpu 0 output chunk 0 should be a copy of gpu 0's input chunk 0"),
            std::string::npos)
      << out_of_place;
  no_copy.out_of_place = false;
  EXPECT_EQ(simulate(no_copy), "");

  // In place, the reduce-scatter's output is the gpu's slice of the input: a receive into the
  // output races with a send still reading that input chunk unless a dependency orders them.
  Algorithm racy = two_gpus("reducescatter");
  for (Gpu& gpu : racy.gpus) {
    ThreadBlock& peer = gpu.threadblocks[0];
    const int32_t mine = 2 * gpu.id;
    for (Step& step : peer.steps)  // sends its own shard
      if (step.type == StepType::Send) step.src_offset = mine;
    ThreadBlock reader;
    reader.id = 1;
    reader.steps.push_back({StepType::Copy, Buffer::Input, mine, Buffer::Scratch, 0, 2});
    gpu.scratch_chunks = 2;
    gpu.threadblocks.push_back(reader);
  }
  EXPECT_NE(simulate(racy).find("with nothing ordering them"), std::string::npos) << simulate(racy);
}

// The check on every exported file: a broken dependency or a wrong receive offset in an
// exported all-gather or reduce-scatter is caught.
TEST(MscclCollectives, CheckerCatchesBrokenExports) {
  const Topology topo = testing::machines({2, 3});
  for (const ir::Collective collective : kSharded) {
    ExportOptions options;
    options.chunks = 20;  // four chunks per rank's shard: room to move a receive inside the output
    const Algorithm good = export_schedule(single(topo, collective, "ring"), 0, options).algorithm;
    ASSERT_EQ(simulate(good), "");
    int caught = 0, tried = 0;
    for (size_t g = 0; g < good.gpus.size(); ++g)
      for (size_t b = 0; b < good.gpus[g].threadblocks.size(); ++b)
        for (size_t i = 0; i < good.gpus[g].threadblocks[b].steps.size(); ++i) {
          const Step& step = good.gpus[g].threadblocks[b].steps[i];
          if (step.type != StepType::Recv && step.type != StepType::RecvCopySend &&
              step.type != StepType::RecvReduceCopy)
            continue;
          if (step.dst != Buffer::Output) continue;
          Algorithm bad = good;
          Step& moved = bad.gpus[g].threadblocks[b].steps[i];
          // Land the received chunks one chunk off, inside the buffer.
          const int32_t size = moved.dst == Buffer::Output ? bad.gpus[g].output_chunks : bad.gpus[g].input_chunks;
          moved.dst_offset = moved.dst_offset + moved.count < size ? moved.dst_offset + 1 : moved.dst_offset - 1;
          ++tried;
          caught += simulate(bad) != "";
        }
    EXPECT_GT(tried, 3) << ir::to_string(collective);
    EXPECT_EQ(caught, tried) << ir::to_string(collective);
  }
}

}  // namespace
}  // namespace flexplan::codegen::msccl
