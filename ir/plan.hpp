// The schedule IR: a plan holds schedules of a collective; a schedule is a list of steps run in
// order; the ops of one step run concurrently and read the buffers as they were when the step
// began. Ranges are in integer units of the schedule's `units` total; the runtime maps unit u of
// a count-element buffer to element floor(u * count / units) on every rank alike.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "ir/rank_list.hpp"
#include "ir/shared_vector.hpp"

namespace flexplan::ir {

enum class OpKind : uint8_t {
  // Afterwards the root's [begin,end) holds the sum of the group members' [begin,end) as they
  // were when the step began. The root contributes only if it is in the group.
  Reduce = 0,
  // Every group member other than the root gets the root's [begin,end).
  Broadcast = 1,
};

// How an op's data moves (codegen/lowering.hpp). It never changes what the op computes.
enum class OpShape : uint8_t {
  // Through the group one member after another: a reduce accumulates along the chain and ends
  // at the root, a broadcast is the mirror chain from the root.
  Chain = 0,
  // Every member exchanges with the root directly: a reduce's members each send their data to
  // the root, which combines them in group order; a broadcast's root sends to every member.
  Star = 1,
};

struct Op {
  OpKind kind = OpKind::Reduce;
  uint64_t begin = 0;
  uint64_t end = 0;
  int32_t root = 0;
  RankList group;  // ranks, in the order data moves through them
  OpShape shape = OpShape::Chain;

  bool root_in_group() const;
  friend bool operator==(const Op&, const Op&) = default;
};

// A star reduce's root receives from every other member at once, and the runtime's tags tell
// those sources apart in the chunk field's 20 bits (runtime/tag.hpp): a star reduce has at most
// this many sources (members other than the root). The verifier refuses more, so a plan is
// refused when written, not when run. A million learners in one star fit (2^20 = 1,048,576).
inline constexpr uint64_t kMaxStarSources = uint64_t{1} << 20;

enum class Phase : uint8_t {
  ReduceScatter = 0,
  AllGather = 1,
  Reduce = 2,     // many-to-one, as the local reduce of the hierarchical algorithm
  Broadcast = 3,  // one-to-many, as its local broadcast
};

struct Step {
  Phase phase = Phase::ReduceScatter;
  int32_t level = 0;  // the tree level whose links this step exercises, as in FlexReduce
  std::vector<Op> ops;
  friend bool operator==(const Step&, const Step&) = default;
};

// What a schedule computes; ir/collective_contract.hpp states each one's before and after.
enum class Collective : uint8_t {
  AllReduce = 0,
  ReduceScatter = 1,
  AllGather = 2,
  Broadcast = 3,
  Reduce = 4,
};
inline constexpr size_t kCollectiveCount = 5;

// A rank's shard of a reduce-scatter or all-gather, in units.
struct UnitRange {
  uint64_t begin = 0, end = 0;
  friend bool operator==(const UnitRange&, const UnitRange&) = default;
};

struct Schedule {
  std::string algorithm;  // "flexreduce", "ring", "blueconnect", "hierarchical", ...
  Collective collective = Collective::AllReduce;
  uint64_t min_bytes = 0;                // the schedule serves messages of
  std::optional<uint64_t> max_bytes;     // [min_bytes, max_bytes); no max means unbounded
  uint64_t units = 1;
  // Broadcast and reduce: the rank holding the data before, or the sum after. 0 otherwise.
  int32_t root = 0;
  // Reduce-scatter and all-gather: rank r's shard is shards[r]. Empty: equal shards in rank
  // order, rank r's [floor(r*U/P), floor((r+1)*U/P)). Empty for the other collectives.
  std::vector<UnitRange> shards;
  // Shared with copies of the schedule until one is changed (shared_vector.hpp): the planner's
  // pipelines of one base and plan.bin's named copies hold their steps once.
  SharedVector<Step> steps;
  // A pipeline held compact: `units` and `steps` are its base's, run on `slices` slices one
  // step apart (ir/pipeline_form.hpp), and `algorithm` ends in "@slices" (plan.bin decodes
  // pipelines so). 1 for a schedule held whole. Code that reads steps and has not been taught
  // the compact form calls ir::require_materialized.
  uint32_t slices = 1;
  friend bool operator==(const Schedule&, const Schedule&) = default;
};

struct Plan {
  int32_t world_size = 0;
  std::string topology_name;
  std::string topology_hash;            // 16 hex digits, Topology::hash_hex()
  std::vector<std::string> rank_names;  // full learner names, indexed by rank
  std::vector<Schedule> schedules;
  friend bool operator==(const Plan&, const Plan&) = default;
};

// Names used by every textual form (text, JSON): "reduce", "reduce_scatter", "allreduce", ...
std::string_view to_string(OpKind);
std::string_view to_string(OpShape);
std::string_view to_string(Phase);
std::string_view to_string(Collective);
// Inverses; throw std::invalid_argument naming the bad word.
OpKind op_kind_from_string(std::string_view);
OpShape op_shape_from_string(std::string_view);
Phase phase_from_string(std::string_view);
Collective collective_from_string(std::string_view);

// The schedule serving a message of `bytes` bytes (for broadcast and reduce, one planned for
// `root`; the root is ignored for the other collectives); throws std::out_of_range if none does.
const Schedule& select_schedule(const Plan&, Collective, uint64_t bytes, int32_t root = 0);
// The one selection every communicator makes (engine, device, staged): the index in
// plan.schedules of the schedule serving a `bytes`-byte call of `collective` (and `root`, for
// broadcast and reduce). With `forced` non-empty, only schedules of that algorithm count: the
// one serving the size, else the first (a forced algorithm serves every size). Nullopt when
// none does.
struct ScheduleQuery {
  Collective collective = Collective::AllReduce;
  uint64_t bytes = 0;
  int32_t root = 0;
  std::string_view forced = {};
};
std::optional<size_t> find_schedule(const Plan&, const ScheduleQuery&);
// The algorithms of the plan's schedules of a collective (and root), each once, in plan order:
// for naming what a forced algorithm could have been.
std::vector<std::string> algorithms_of(const Plan&, Collective, int32_t root = 0);

// Whether the plan holds schedules of this collective (for broadcast and reduce: for this root).
bool plans_collective(const Plan&, Collective, int32_t root = 0);
// Whether it holds schedules of this collective for any root: a broadcast or reduce from a root
// it lacks then runs a schedule the runtime derives (docs/runtime.md).
bool plans_collective_any_root(const Plan&, Collective);
// Whether a schedule of this collective names a root (broadcast, reduce) or shards
// (reduce-scatter, all-gather).
inline bool has_root(Collective c) { return c == Collective::Broadcast || c == Collective::Reduce; }
inline bool has_shards(Collective c) {
  return c == Collective::ReduceScatter || c == Collective::AllGather;
}

// Unit u of a `count`-element buffer is element floor(u * count / units); 128-bit where the
// product needs it, so that neither factor needs to be small (a 128-bit division costs several
// times a 64-bit one, and the runtime maps ranges on every operation).
inline uint64_t unit_to_element(uint64_t u, uint64_t units, uint64_t count) {
  uint64_t product = 0;
  if (!__builtin_mul_overflow(u, count, &product)) return product / units;
  return static_cast<uint64_t>((static_cast<unsigned __int128>(u) * count) / units);
}

}  // namespace flexplan::ir
