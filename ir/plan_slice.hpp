// One rank's part of a plan.bin (format 7), read and checked without the rest of the file
// (docs/ir.md, "Loading at job start"). The reader reads the 100-byte header, then the head and
// the two tables (every schedule's fields and steps without ops, one entry per block of ops and
// per chunk of per-rank entries: a few bytes per block), then only the blocks whose ranks
// include this rank and the one chunk holding its entry.
//
// What it checks: the header's checksum; the fingerprint the header stores against the head and
// tables (which hold every block's and chunk's checksum, so the fingerprint covers the whole
// plan and the ranks compare it); the checksum of every block and of the chunk it reads; the
// plan's fields (check_plan_fields without the names) and each schedule's; the structure
// (check_structure's checks) of every op in the blocks it reads; that each such op's ranks are
// among the block's; that the ops it takes part in are exactly those its entry records (their
// count and a digest of where it sits in each, which the writer computed from the whole plan:
// so an op is found by all its ranks or the job fails); and the pipeline limits for its share.
// What it does not check: the symbolic execution, that is whether the plan computes its
// collective. The planner verified the whole plan before writing it (write_plan_file), and
// `flexplan verify` does so again; the checksums and the fingerprint are what tie the file a
// rank reads to the file that was verified. They guard against corruption, not forgery.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "ir/plan.hpp"

namespace flexplan::ir {

// An op this rank takes part in (as a group member or the root), with its index in its step.
struct SliceOp {
  uint64_t index = 0;
  Op op;
  friend bool operator==(const SliceOp&, const SliceOp&) = default;
};
struct SliceStep {
  Phase phase = Phase::ReduceScatter;
  int32_t level = 0;
  uint64_t op_count = 0;     // all the step's ops
  std::vector<SliceOp> ops;  // this rank's, by index
  friend bool operator==(const SliceStep&, const SliceStep&) = default;
};
struct SliceSchedule {
  // Every field but the steps, as decode_plan gives them: a compact pipeline has its base's
  // units and its slice count.
  Schedule fields;
  // The schedule whose steps it runs, when it names an earlier one's (then `steps` is empty).
  std::optional<size_t> steps_of;
  std::vector<SliceStep> steps;
  friend bool operator==(const SliceSchedule&, const SliceSchedule&) = default;
};

// What reading the slice cost, for the benchmark and the tests.
struct SliceReadCost {
  uint64_t file_bytes = 0, bytes_read = 0;  // bytes_read: header, tables, blocks and chunk
  uint64_t blocks = 0, blocks_read = 0, ops_decoded = 0;
};

struct RankSlice {
  int32_t rank = 0;
  int32_t world_size = 0;
  std::string topology_name;
  std::string topology_hash;  // as Plan::topology_hash: empty, or 16 hex digits
  std::optional<std::string> rank_name;  // when the plan names its ranks
  uint64_t fingerprint = 0;  // plan_fingerprint of the whole plan, checked against the tables
  // The header says the writer verified the plan as a whole (write_plan_file).
  bool verified_when_written = false;
  std::vector<SliceSchedule> schedules;
  uint64_t ops = 0;  // the written ops this rank takes part in (a pipeline's base counted once)
  SliceReadCost cost;
};

// Reads and checks `rank`'s part of the plan.bin at `path` (a regular file: it is read at
// offsets). Throws PlanFormatError for a malformed or corrupted file (naming the block or chunk
// and the rank), for a format 6 file (which has no per-rank index: load it whole), and when
// the rank's ops differ from what its entry records; VerifyError for wrong fields or ops;
// std::invalid_argument for a rank outside the plan's world.
RankSlice load_rank_slice(const std::string& path, int32_t rank);
// The same from bytes in memory (all of the file).
RankSlice read_rank_slice(std::span<const uint8_t> bytes, const std::string& source, int32_t rank);

}  // namespace flexplan::ir
