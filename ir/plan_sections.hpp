// plan.bin's parts (internal to the IR library): the op coding shared by every format version,
// and format 7's header, head, block table, chunk table and per-rank entries, which the whole
// decoder (plan_binary.cpp) and the per-rank reader (plan_slice.cpp) both parse. docs/ir.md
// ("plan.bin") has the byte layout; the comments here say what each check guards.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "ir/byte_io.hpp"
#include "ir/plan.hpp"

namespace flexplan::ir::detail {

inline constexpr char kPlanMagic[8] = {'F', 'L', 'X', 'P', 'L', 'A', 'N', '\0'};
inline constexpr uint64_t kMaxRank = std::numeric_limits<int32_t>::max();
inline constexpr uint32_t kOldestPlanFormat = 6;  // read whole, as before format 7

// The fields both headers start with.
inline constexpr size_t kVersionOffset = 8, kFlagsOffset = 12, kWriterOffset = 16,
                        kVersionField = 16, kTopologyHashOffset = 32, kWorldSizeOffset = 40,
                        kPayloadLengthOffset = 44;
inline constexpr uint32_t kFlagTopologyHash = 1;
// Format 7: the writer verified the plan as a whole before writing it (write_plan_file). Not
// part of the fingerprint: it says who vouches for the plan, not what the plan is.
inline constexpr uint32_t kFlagVerified = 2;
// Format 6: a checksum over the header before it and the whole payload.
inline constexpr size_t kChecksumOffsetV6 = 52, kHeaderSizeV6 = 60;
// Format 7: the fingerprint, the sections' lengths, and a checksum of the header alone.
inline constexpr size_t kFingerprintOffset = 52, kHeadLengthOffset = 60,
                        kBlockTableLengthOffset = 68, kChunkTableLengthOffset = 76,
                        kBlocksLengthOffset = 84, kHeaderChecksumOffset = 92, kHeaderSizeV7 = 100;

// How the writer cuts a step's ops into blocks (each coded from an empty op, so that a reader
// can start at any block): a block ends with the step, or once it holds kBlockBytes and
// kBlockRestartRatio times what its first op took (which, coded without an op before it, may
// take a whole group: the ratio bounds what restarting costs the file). A block names the
// ranks of its ops as at most kMaxBlockIntervals progressions (RankInterval): exactly where
// they fall into that many, else a superset.
inline constexpr uint64_t kBlockBytes = 2048, kBlockRestartRatio = 8;
inline constexpr size_t kMaxBlockIntervals = 16;
// Per-rank entries come in chunks of at most this many, each with its checksum.
inline constexpr uint64_t kChunkEntries = 1024;
// The least an op takes in a block (head, begin, length, root, group size or edit count).
inline constexpr uint64_t kMinOpBytes = 5;

// ---- Ops, as every format codes them: relative to the op before in the step (or block).

struct OpContext {
  uint64_t end = 0;
  int32_t root = 0;
  const RankList* group = nullptr;
};

// Appends `op`; `positions` is scratch space.
void encode_op(ByteWriter& out, const Op& op, OpContext& previous, std::vector<size_t>& positions);

// An op in the group-edits form repeats the group before it for a few bytes, so a file could
// claim far more group members than it has bytes. Plans flexplan writes hold at most about 1.3
// members per payload byte (docs/ir.md); a file may hold 64 per byte, plus a million.
inline constexpr uint64_t kGroupMembersPerByte = 64, kGroupMembersAnyway = uint64_t{1} << 20;
struct GroupMemberBudget {
  uint64_t left;
  uint64_t payload_bytes;
  static GroupMemberBudget for_bytes(uint64_t bytes) {
    return {kGroupMembersPerByte * bytes + kGroupMembersAnyway, bytes};
  }
  void spend(ByteReader& in, size_t at, size_t members);
};

// Decodes into `op` in place; `previous` is the op before it in its step (format 6) or block
// (format 7), null for the first.
void decode_op(ByteReader& in, Op& op, const Op* previous, GroupMemberBudget& members);

// ---- The schedule's fields, as formats 6 and 7 code them (up to and with same_steps).

struct ScheduleFields {
  Schedule schedule;  // its fields; `units` is the base's for a pipeline (slices > 1)
  uint64_t slices = 1;
  size_t slices_at = 0;
  uint64_t same = 0;  // schedules back whose steps it takes; 0: its own follow
  size_t same_at = 0;
};
// Decodes and checks the fields; `before` schedules precede it.
ScheduleFields decode_schedule_fields(ByteReader& in, int32_t world_size, size_t before);
// Writes them (the inverse), for the schedule as written: `units` and `slices` of what is
// written (the base for a pipeline), `same` as above.
void encode_schedule_fields(ByteWriter& out, const Schedule& schedule, uint64_t units, uint64_t slices,
                            uint64_t same);

// ---- Format 7.

struct HeaderV7 {
  uint32_t flags = 0;
  std::string writer;
  uint64_t topology_hash = 0;
  int32_t world_size = 0;
  uint64_t payload_length = 0, fingerprint = 0;
  uint64_t head_length = 0, block_table_length = 0, chunk_table_length = 0, blocks_length = 0;

  // The head and the two tables lie together after the header: what every reader reads whole
  // and what the fingerprint covers.
  uint64_t tables_length() const { return head_length + block_table_length + chunk_table_length; }
  uint64_t blocks_offset() const { return kHeaderSizeV7 + tables_length(); }
  uint64_t chunks_offset() const { return blocks_offset() + blocks_length; }
  uint64_t chunks_length() const { return payload_length - tables_length() - blocks_length; }
};

// The format version of plan.bin bytes that start with at least the magic, or the error the
// decoders give: empty, bad magic, truncated before the version.
uint32_t read_format_version(std::span<const uint8_t> bytes, const std::string& source);
[[noreturn]] void unsupported_version(const ByteReader& header, uint32_t format);

// Parses and checks a format 7 header: `bytes` hold at least its 100 bytes (the caller has read
// the version); `total_size`, when known, is the whole file's size, which the payload length
// must match. Checks the header's checksum first, so that a flipped bit reads as corruption.
HeaderV7 parse_header_v7(std::span<const uint8_t> bytes, const std::string& source,
                         std::optional<uint64_t> total_size);

// The fingerprint's starting value: the header fields that are part of the plan (flags but
// kFlagVerified, topology hash, world size); the writer's version and the lengths are not.
uint64_t fingerprint_seed(std::span<const uint8_t> header);
// Sets kFlagVerified in format 7 bytes and the header's checksum again.
void mark_verified(std::vector<uint8_t>& bytes);
// Format 7's fingerprint: FNV-1a 64 from fingerprint_seed over the head and the two tables.
// The tables hold the checksum of every block and chunk, so this covers the whole plan.
uint64_t tables_fingerprint(std::span<const uint8_t> header, std::span<const uint8_t> tables);
// Throws when the tables do not give the fingerprint the header stores.
void check_tables_fingerprint(const HeaderV7& header, std::span<const uint8_t> header_bytes,
                              std::span<const uint8_t> tables, const std::string& source);

struct StepSummary {
  Phase phase = Phase::ReduceScatter;
  int32_t level = 0;
  uint64_t ops = 0, blocks = 0;
  uint64_t first_block = 0;  // in the block table
};
struct HeadSchedule {
  ScheduleFields fields;
  std::optional<size_t> named_from;  // the schedule whose written steps it takes
  std::vector<StepSummary> steps;    // its own, when not named
  uint64_t ops = 0;                  // in its written steps
};
struct Head {
  std::string topology_name;
  bool rank_names = false;
  std::vector<HeadSchedule> schedules;
  uint64_t blocks = 0, ops = 0;
};
// `bytes`: the head section, at file offset `base`.
Head parse_head(std::span<const uint8_t> bytes, const std::string& source, size_t base,
                const HeaderV7& header);

// Ranks first, first + stride, ..., last: a run of consecutive ranks (stride 1), or of every
// machine's leader, or of a tree level's roots. last - first is a multiple of stride >= 1.
struct RankInterval {
  int32_t first = 0, last = 0, stride = 1;
  uint64_t count() const { return static_cast<uint64_t>(last - first) / static_cast<uint64_t>(stride) + 1; }
  friend bool operator==(const RankInterval&, const RankInterval&) = default;
};
struct BlockEntry {
  uint64_t ops = 0, offset = 0, length = 0, checksum = 0;  // offset: in the file
  uint32_t schedule = 0, step = 0;
  uint64_t first_op = 0;  // the index in its step of its first op
  uint32_t intervals_begin = 0, intervals_end = 0;
  size_t entry_at = 0;  // where the table describes it, for errors
};
struct BlockTable {
  std::vector<BlockEntry> blocks;
  std::vector<RankInterval> intervals;
  // Whether the block's progressions hold `rank`.
  bool holds(const BlockEntry& block, int32_t rank) const;
};
BlockTable parse_block_table(std::span<const uint8_t> bytes, const std::string& source, size_t base,
                             const Head& head, const HeaderV7& header);

struct ChunkEntry {
  int32_t first_rank = 0;
  uint64_t span = 0, entries = 0, offset = 0, length = 0, checksum = 0;
  size_t entry_at = 0;
};
std::vector<ChunkEntry> parse_chunk_table(std::span<const uint8_t> bytes, const std::string& source,
                                          size_t base, const Head& head, const HeaderV7& header);
// The chunk whose ranks include `rank`, or null.
const ChunkEntry* chunk_of(const std::vector<ChunkEntry>& chunks, int32_t rank);

// One rank's entry: its name (when the plan names ranks), and how many written ops it takes part
// in with their participation digest.
struct RankEntry {
  int32_t rank = 0;
  std::string name;
  uint64_t ops = 0, digest = 0;
};
// Reads a chunk's entries one by one, checking each against the chunk table.
class ChunkReader {
 public:
  ChunkReader(std::span<const uint8_t> bytes, const std::string& source, const ChunkEntry& chunk,
              bool names);
  bool next(RankEntry& entry);  // false after the last

 private:
  ByteReader in_;
  const ChunkEntry& chunk_;
  bool names_;
  uint64_t read_ = 0;
  int64_t last_rank_ = -1;
};

// The ranks of a block as at most kMaxBlockIntervals progressions, in order and with disjoint
// ranges: the runs of equal steps of `ranks` (sorted and made unique here) where there are no
// more than that (exact), else the ranks cut at their widest gaps, each part with the largest
// stride that holds it (a superset).
std::vector<RankInterval> rank_progressions(std::vector<int32_t>& ranks);

// The checksum of a block or chunk: FNV-1a 64's basis and prime over the bytes as 8-byte
// little-endian words, each multiplication followed by h ^= h >> 29, then the last 1-7 bytes
// one by one as FNV-1a 64 does. A changed word always changes it (each step is a bijection of
// h), and it costs an eighth of FNV-1a's bytewise loop.
uint64_t section_checksum(std::span<const uint8_t> bytes);

// What a rank's entry digests: each written op it takes part in, by the schedule that writes
// the steps and the step (step_key), the op's index in the step (op_key), and the rank's place
// in the group (the group's size for a root outside it). Summed modulo 2^64.
uint64_t step_key(uint64_t schedule, uint64_t step);
uint64_t op_key(uint64_t step_key, uint64_t op);
uint64_t participation_hash(uint64_t op_key, uint64_t position);
// Calls take(rank, position) for each rank of `op`: its group members, then the root when
// outside the group.
template <typename Take>
void for_each_participant(const Op& op, Take&& take) {
  bool root_in_group = false;
  for (size_t i = 0; i < op.group.size(); ++i) {
    root_in_group |= op.group[i] == op.root;
    take(op.group[i], static_cast<uint64_t>(i));
  }
  if (!root_in_group) take(op.root, static_cast<uint64_t>(op.group.size()));
}

// Per rank of [0, world): ops counted and digests summed, held in a table by rank when the world
// is not much larger than what is added, else as a list sorted at the end (a small file may
// claim a world of two billion).
class RankTally {
 public:
  RankTally(int32_t world_size, uint64_t expected_adds);
  void add(int32_t rank, uint64_t hash);
  struct Total {
    int32_t rank;
    uint64_t ops, digest;
  };
  // Ranks with at least one op, ascending.
  std::vector<Total> totals() &&;

 private:
  struct Slot {
    uint64_t ops = 0, digest = 0;
  };
  int32_t world_size_;
  std::vector<Slot> table_;
  std::vector<std::pair<int32_t, uint64_t>> added_;
};

// For tests and the fuzzer: recomputes every checksum of plan.bin bytes (format 6: the one
// checksum; format 7: each block's and chunk's in the tables, as far as the tables can be read,
// then the fingerprint and the header's checksum), so that they can plant well-sealed files with
// hostile contents. Bytes too short for their header are left as they are.
void reseal_plan(std::vector<uint8_t>& bytes);

}  // namespace flexplan::ir::detail
