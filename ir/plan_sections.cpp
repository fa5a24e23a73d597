// plan.bin's parts shared by the whole decoder and the per-rank reader (plan_sections.hpp).
#include "ir/plan_sections.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <numeric>

#include "flexplan/version.hpp"
#include "ir/pipeline_form.hpp"
#include "ir/plan_binary.hpp"

namespace flexplan::ir::detail {

namespace {

constexpr uint64_t kGroupList = 0, kGroupEdits = 1;

// The positions where `group` differs from `previous`, when the edit form is the shorter.
bool edit_positions(const RankList& group, const RankList* previous, std::vector<size_t>& positions) {
  if (!previous || previous->size() != group.size()) return false;
  positions.clear();
  for (size_t i = 0; i < group.size(); ++i) {
    if (group[i] != (*previous)[i]) {
      if (2 * (positions.size() + 1) > group.size()) return false;
      positions.push_back(i);
    }
  }
  return true;
}

// A rank coded as a difference from `base`: it must land in [0, 2^31).
int32_t decode_rank(ByteReader& in, int64_t base, const char* what) {
  const size_t at = in.offset();
  const int64_t delta = in.signed_varint(what);
  // base is in [0, 2^31), so base + delta overflows only if the result is out of range anyway.
  if (delta < -base || delta > static_cast<int64_t>(kMaxRank) - base)
    in.fail_at(at, fmt::format("{} {} {:+} is not a rank (0 to {})", what, base, delta, kMaxRank));
  return static_cast<int32_t>(base + delta);
}

uint64_t read_u64(std::span<const uint8_t> bytes, size_t at) {
  uint64_t value = 0;
  for (int i = 0; i < 8; ++i) value |= static_cast<uint64_t>(bytes[at + i]) << (8 * i);
  return value;
}

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

void encode_op(ByteWriter& out, const Op& op, OpContext& previous, std::vector<size_t>& positions) {
  if (op.end < op.begin)
    throw PlanFormatError(fmt::format("plan: an op's range [{},{}) ends before it begins and "
                                      "cannot be written",
                                      op.begin, op.end));
  const bool edits = edit_positions(op.group, previous.group, positions);
  // One varint heads the op: kind | group form << 1 | shape << 2.
  out.varint(static_cast<uint64_t>(op.kind) | (edits ? kGroupEdits : kGroupList) << 1 |
             static_cast<uint64_t>(op.shape) << 2);
  out.signed_varint(static_cast<int64_t>(op.begin - previous.end));
  out.varint(op.end - op.begin);
  out.signed_varint(int64_t{op.root} - previous.root);
  if (edits) {
    out.varint(positions.size());
    size_t next = 0;  // the first position not yet passed
    for (size_t at : positions) {
      out.varint(at - next);
      out.signed_varint(int64_t{op.group[at]} - (*previous.group)[at]);
      next = at + 1;
    }
  } else {
    out.varint(op.group.size());
    int32_t before = op.root;
    for (int32_t member : op.group) {
      out.signed_varint(int64_t{member} - before);
      before = member;
    }
  }
  previous = OpContext{op.end, op.root, &op.group};
}

void GroupMemberBudget::spend(ByteReader& in, size_t at, size_t members) {
  if (members > left)
    in.fail_at(at, fmt::format("the ops' groups hold more members than a payload of {} bytes may "
                               "({} per byte, plus {})",
                               payload_bytes, kGroupMembersPerByte, kGroupMembersAnyway));
  left -= members;
}

void decode_op(ByteReader& in, Op& op, const Op* previous, GroupMemberBudget& members) {
  const size_t head_at = in.offset();
  const uint64_t head = in.varint_at_most(7, "op kind, group form and shape");
  op.kind = static_cast<OpKind>(head & 1);
  op.shape = static_cast<OpShape>(head >> 2);
  const uint64_t previous_end = previous ? previous->end : 0;
  op.begin = previous_end + static_cast<uint64_t>(in.signed_varint("op begin"));
  const size_t length_at = in.offset();
  const uint64_t length = in.varint("op length");
  if (length > std::numeric_limits<uint64_t>::max() - op.begin)
    in.fail_at(length_at, "op end overflows 64 bits");
  op.end = op.begin + length;
  op.root = decode_rank(in, previous ? previous->root : 0, "op root");
  if (((head >> 1) & 1) == kGroupEdits) {
    if (!previous)
      in.fail_at(head_at, "the first op of a step cannot edit the group of an op before it");
    members.spend(in, head_at, previous->group.size());
    op.group = previous->group;
    const size_t edits = in.count(2, "group edit count");
    if (edits > op.group.size())
      in.fail_at(in.offset(), fmt::format("{} group edits for a group of {}", edits, op.group.size()));
    size_t next = 0;
    for (size_t e = 0; e < edits; ++e) {
      const size_t skip_at = in.offset();
      const uint64_t skip = in.varint("group edit position");
      if (skip >= op.group.size() - next)
        in.fail_at(skip_at, fmt::format("group edit position skips past the end of the group "
                                        "of {}",
                                        op.group.size()));
      const size_t at = next + skip;
      op.group[at] = decode_rank(in, op.group[at], "group member");
      next = at + 1;
    }
  } else {
    const size_t size_at = in.offset();
    const size_t size = in.count(1, "group size");
    if (size > kMaxRank + 1)  // only in a file of gigabytes; a group's ranks are distinct
      in.fail_at(size_at, fmt::format("group size {} exceeds the {} ranks there can be", size,
                                      kMaxRank + 1));
    members.spend(in, size_at, size);
    op.group.resize(size);
    int64_t before = op.root;
    for (int32_t& member : op.group) before = member = decode_rank(in, before, "group member");
  }
}

ScheduleFields decode_schedule_fields(ByteReader& in, int32_t world_size, size_t before) {
  ScheduleFields fields;
  Schedule& schedule = fields.schedule;
  schedule.algorithm = in.utf8_string("algorithm name");
  schedule.collective = static_cast<Collective>(in.varint_at_most(kCollectiveCount - 1, "collective"));
  if (has_root(schedule.collective))
    schedule.root = static_cast<int32_t>(in.varint_at_most(kMaxRank, "root"));
  if (has_shards(schedule.collective)) {
    // Each shard takes two bytes at least: no allocation beyond what the file holds.
    const size_t at = in.offset();
    const size_t shards = in.count(2, "shard count");
    if (shards > static_cast<uint64_t>(world_size))
      in.fail_at(at, fmt::format("{} shards for a world of {} ranks", shards, world_size));
    schedule.shards.resize(shards);
    for (UnitRange& shard : schedule.shards) {
      shard.begin = in.varint("shard begin");
      const uint64_t length = in.varint("shard length");
      if (length > std::numeric_limits<uint64_t>::max() - shard.begin)
        in.fail_at(in.offset(), "a shard's end does not fit in 64 bits");
      shard.end = shard.begin + length;
    }
  }
  schedule.min_bytes = in.varint("min bytes");
  if (in.varint_at_most(1, "max bytes flag")) schedule.max_bytes = in.varint("max bytes");
  schedule.units = in.varint("units");
  fields.slices_at = in.offset();
  const uint64_t slices = in.varint("pipeline slices");
  const std::string suffix = fmt::format("@{}", slices);
  const std::string_view name = schedule.algorithm;
  if (slices == 0 || slices > kMaxPipelineSlices)
    in.fail_at(fields.slices_at, fmt::format("pipeline slices {} out of range (1 to {})", slices,
                                             kMaxPipelineSlices));
  if (slices > 1 && (schedule.units % slices != 0 || name.size() <= suffix.size() ||
                     name.substr(name.size() - suffix.size()) != suffix))
    in.fail_at(fields.slices_at, fmt::format("schedule '{}' with {} units is written as a pipeline of {} "
                                             "slices: its name must end in '{}' and its units divide "
                                             "into the slices",
                                             schedule.algorithm, schedule.units, slices, suffix));
  if (slices > 1) schedule.units /= slices;  // the base's, until expanded
  fields.slices = slices;
  fields.same_at = in.offset();
  fields.same = in.varint("schedules back with the same steps");
  if (fields.same > before)
    in.fail_at(fields.same_at, fmt::format("schedule '{}' takes the steps of the schedule {} back, but "
                                           "only {} come before it",
                                           schedule.algorithm, fields.same, before));
  return fields;
}

void encode_schedule_fields(ByteWriter& out, const Schedule& schedule, uint64_t units, uint64_t slices,
                            uint64_t same) {
  out.string(schedule.algorithm);
  out.varint(static_cast<uint64_t>(schedule.collective));
  // The contract's fields (format 6): a root for broadcast and reduce, the shards (0 of them
  // for equal shards; else begin and length each) for reduce-scatter and all-gather.
  if (has_root(schedule.collective)) out.varint(static_cast<uint64_t>(schedule.root));
  if (has_shards(schedule.collective)) {
    out.varint(schedule.shards.size());
    for (const UnitRange& shard : schedule.shards) {
      out.varint(shard.begin);
      out.varint(shard.end - shard.begin);
    }
  }
  out.varint(schedule.min_bytes);
  out.varint(schedule.max_bytes ? 1 : 0);
  if (schedule.max_bytes) out.varint(*schedule.max_bytes);
  out.varint(units);
  out.varint(slices);
  out.varint(same);
}

uint32_t read_format_version(std::span<const uint8_t> bytes, const std::string& source) {
  ByteReader header(bytes, source);
  if (bytes.empty()) header.fail_at(0, "the file is empty, not a plan.bin");
  if (bytes.size() < sizeof kPlanMagic) {
    const bool prefix = std::memcmp(bytes.data(), kPlanMagic, bytes.size()) == 0;
    header.fail_at(0, prefix ? fmt::format("truncated: {} bytes, shorter than the {}-byte header",
                                           bytes.size(), kHeaderSizeV7)
                             : std::string("not a flexplan plan.bin (bad magic)"));
  }
  if (std::memcmp(bytes.data(), kPlanMagic, sizeof kPlanMagic) != 0)
    header.fail_at(0, "not a flexplan plan.bin (bad magic)");
  header.bytes(sizeof kPlanMagic, "magic");
  return header.fixed32("format version");
}

void unsupported_version(const ByteReader& header, uint32_t format) {
  header.fail_at(kVersionOffset,
                 fmt::format("plan.bin format version {} is not supported (this flexplan {} reads "
                             "versions {} and {}; plan again to write version {})",
                             format, kVersion, kOldestPlanFormat, kPlanFormatVersion, kPlanFormatVersion));
}

HeaderV7 parse_header_v7(std::span<const uint8_t> bytes, const std::string& source,
                         std::optional<uint64_t> total_size) {
  ByteReader header(bytes, source);
  if (bytes.size() < kHeaderSizeV7)
    header.fail_at(bytes.size(), fmt::format("truncated: {} bytes, shorter than the {}-byte header",
                                             bytes.size(), kHeaderSizeV7));
  HeaderV7 h;
  const uint64_t stored_checksum = read_u64(bytes, kHeaderChecksumOffset);
  const uint64_t checksum = fnv1a64(bytes.first(kHeaderChecksumOffset));
  header.bytes(kFlagsOffset, "magic and version");
  h.flags = header.fixed32("flags");
  {
    const auto field = header.bytes(kVersionField, "flexplan version");
    for (uint8_t byte : field) {
      if (byte == 0) break;
      h.writer.push_back(static_cast<char>(byte));
    }
  }
  if (checksum != stored_checksum)
    header.fail_at(kHeaderChecksumOffset,
                   fmt::format("header checksum mismatch (stored {:016x}, the header gives {:016x}): "
                               "the file is corrupted",
                               stored_checksum, checksum));
  h.topology_hash = header.fixed64("topology hash");
  const uint32_t world_size = header.fixed32("world size");
  h.payload_length = header.fixed64("payload length");
  h.fingerprint = header.fixed64("fingerprint");
  h.head_length = header.fixed64("head length");
  h.block_table_length = header.fixed64("block table length");
  h.chunk_table_length = header.fixed64("chunk table length");
  h.blocks_length = header.fixed64("blocks length");
  if (h.flags & ~(kFlagTopologyHash | kFlagVerified))
    header.fail_at(kFlagsOffset, fmt::format("unknown flags {:#x}", h.flags));
  // Kept canonical: the fingerprint covers this field.
  if (!(h.flags & kFlagTopologyHash) && h.topology_hash != 0)
    header.fail_at(kTopologyHashOffset, fmt::format("topology hash {:016x} without the flag that "
                                                    "announces one",
                                                    h.topology_hash));
  if (world_size < 1 || world_size > kMaxRank)
    header.fail_at(kWorldSizeOffset, fmt::format("world size {} is out of range", world_size));
  h.world_size = static_cast<int32_t>(world_size);
  if (total_size) {
    const uint64_t available = *total_size - kHeaderSizeV7;
    if (h.payload_length > available)
      header.fail_at(*total_size, fmt::format("truncated: the header announces a {}-byte payload but "
                                              "only {} bytes follow it",
                                              h.payload_length, available));
    if (h.payload_length < available)
      header.fail_at(kHeaderSizeV7 + h.payload_length,
                     fmt::format("{} trailing bytes after the {}-byte payload",
                                 available - h.payload_length, h.payload_length));
  }
  // The sections lie in the payload, in order; the chunks take what is left.
  uint64_t left = h.payload_length;
  for (const auto& [length, what, at] :
       {std::tuple{h.head_length, "head", kHeadLengthOffset},
        std::tuple{h.block_table_length, "block table", kBlockTableLengthOffset},
        std::tuple{h.chunk_table_length, "chunk table", kChunkTableLengthOffset},
        std::tuple{h.blocks_length, "blocks", kBlocksLengthOffset}}) {
    if (length > left)
      header.fail_at(at, fmt::format("the {} length {} exceeds the {} bytes of the payload left for it",
                                     what, length, left));
    left -= length;
  }
  return h;
}

uint64_t fingerprint_seed(std::span<const uint8_t> header) {
  uint8_t flags[4];
  std::memcpy(flags, header.data() + kFlagsOffset, 4);
  flags[0] &= static_cast<uint8_t>(~kFlagVerified);
  uint64_t seed = fnv1a64(std::span<const uint8_t>(flags, 4));
  return fnv1a64(header.subspan(kTopologyHashOffset, kPayloadLengthOffset - kTopologyHashOffset), seed);
}

uint64_t tables_fingerprint(std::span<const uint8_t> header, std::span<const uint8_t> tables) {
  return fnv1a64(tables, fingerprint_seed(header));
}

void check_tables_fingerprint(const HeaderV7& header, std::span<const uint8_t> header_bytes,
                              std::span<const uint8_t> tables, const std::string& source) {
  const uint64_t fingerprint = tables_fingerprint(header_bytes, tables);
  if (fingerprint != header.fingerprint)
    ByteReader(tables, source, kHeaderSizeV7)
        .fail_at(kHeaderSizeV7,
                 fmt::format("the head and tables (bytes {} to {}) give the fingerprint {:016x}, not the "
                             "{:016x} the header stores: the file is corrupted (written by flexplan '{}')",
                             kHeaderSizeV7, kHeaderSizeV7 + tables.size(), fingerprint, header.fingerprint,
                             header.writer));
}

Head parse_head(std::span<const uint8_t> bytes, const std::string& source, size_t base,
                const HeaderV7& header) {
  ByteReader in(bytes, source, base);
  Head head;
  head.topology_name = in.utf8_string("topology name");
  head.rank_names = in.varint_at_most(1, "rank names flag") == 1;
  head.schedules.resize(in.count(7, "schedule count"));
  // Every op takes kMinOpBytes of the blocks: the head's counts are bounded by them.
  const uint64_t most_ops = header.blocks_length / kMinOpBytes;
  for (size_t i = 0; i < head.schedules.size(); ++i) {
    HeadSchedule& entry = head.schedules[i];
    entry.fields = decode_schedule_fields(in, header.world_size, i);
    const Schedule& schedule = entry.fields.schedule;
    if (entry.fields.same != 0) {
      const size_t from = i - entry.fields.same;
      // A schedule that names another names what that one wrote.
      const HeadSchedule& other = head.schedules[head.schedules[from].named_from.value_or(from)];
      if (other.steps.empty())
        in.fail_at(entry.fields.same_at, fmt::format("schedule '{}' takes the steps of schedule {} ('{}'), which "
                                                     "has none",
                                                     schedule.algorithm, from, other.fields.schedule.algorithm));
      if (other.fields.schedule.units != schedule.units)
        in.fail_at(entry.fields.same_at, fmt::format("schedule '{}' takes the steps of schedule {} ('{}'), whose "
                                                     "{} units differ from its {}",
                                                     schedule.algorithm, from, other.fields.schedule.algorithm,
                                                     other.fields.schedule.units, schedule.units));
      entry.named_from = head.schedules[from].named_from.value_or(from);
      entry.ops = other.ops;
      continue;
    }
    entry.steps.resize(in.count(4, "step count"));
    for (StepSummary& step : entry.steps) {
      step.phase = static_cast<Phase>(in.varint_at_most(static_cast<uint64_t>(Phase::Broadcast), "phase"));
      step.level = in.signed_varint32("level");
      const size_t ops_at = in.offset();
      step.ops = in.varint("op count");
      if (step.ops > most_ops - head.ops)
        in.fail_at(ops_at, fmt::format("op count {} exceeds what the {} bytes of blocks can hold with the "
                                       "{} ops before it",
                                       step.ops, header.blocks_length, head.ops));
      const size_t blocks_at = in.offset();
      step.blocks = in.varint("block count");
      if (step.blocks > step.ops || (step.ops > 0 && step.blocks == 0))
        in.fail_at(blocks_at, fmt::format("{} blocks for a step of {} ops", step.blocks, step.ops));
      step.first_block = head.blocks;
      head.blocks += step.blocks;
      head.ops += step.ops;
      entry.ops += step.ops;
    }
  }
  if (in.remaining() != 0) in.fail(fmt::format("{} unread bytes at the end of the head", in.remaining()));
  return head;
}

bool BlockTable::holds(const BlockEntry& block, int32_t rank) const {
  for (uint32_t i = block.intervals_begin; i < block.intervals_end; ++i) {
    const RankInterval& p = intervals[i];
    if (rank < p.first) return false;
    if (rank <= p.last) return (rank - p.first) % p.stride == 0;  // the ranges are disjoint
  }
  return false;
}

BlockTable parse_block_table(std::span<const uint8_t> bytes, const std::string& source, size_t base,
                             const Head& head, const HeaderV7& header) {
  ByteReader in(bytes, source, base);
  BlockTable table;
  const size_t count_at = in.offset();
  const uint64_t count = in.count(11, "block count");  // ops, length, checksum, progressions
  if (count != head.blocks)
    in.fail_at(count_at, fmt::format("the block table lists {} blocks, the head's steps {}", count, head.blocks));
  table.blocks.resize(count);
  uint64_t offset = header.blocks_offset();
  const uint64_t blocks_end = header.blocks_offset() + header.blocks_length;
  size_t next = 0;
  for (size_t i = 0; i < head.schedules.size(); ++i) {
    const HeadSchedule& schedule = head.schedules[i];
    for (size_t s = 0; s < schedule.steps.size(); ++s) {
      const StepSummary& step = schedule.steps[s];
      uint64_t first_op = 0;
      for (uint64_t b = 0; b < step.blocks; ++b, ++next) {
        BlockEntry& block = table.blocks[next];
        block.entry_at = in.offset();
        block.schedule = static_cast<uint32_t>(i);
        block.step = static_cast<uint32_t>(s);
        block.first_op = first_op;
        const size_t ops_at = in.offset();
        block.ops = in.varint("block op count");
        // Each block holds an op; the last of the step holds what the others left.
        const uint64_t left = step.ops - first_op;
        const uint64_t others = step.blocks - b - 1;
        if (block.ops == 0 || block.ops > left - others || (others == 0 && block.ops != left))
          in.fail_at(ops_at, fmt::format("block {} holds {} ops: schedule {} step {} has {} ops in {} blocks, "
                                         "{} of them left for this block and the {} after it",
                                         next, block.ops, i, s, step.ops, step.blocks, left, others));
        const size_t length_at = in.offset();
        block.length = in.varint("block length");
        if (block.length < kMinOpBytes * block.ops || block.length > blocks_end - offset)
          in.fail_at(length_at, fmt::format("block {} of {} ops takes {} bytes: fewer than {} per op, or more "
                                            "than the {} bytes of blocks left",
                                            next, block.ops, block.length, kMinOpBytes, blocks_end - offset));
        block.offset = offset;
        offset += block.length;
        block.checksum = in.fixed64("block checksum");
        const uint64_t intervals = in.varint_at_most(kMaxBlockIntervals, "block progression count");
        block.intervals_begin = static_cast<uint32_t>(table.intervals.size());
        int64_t after = 0;  // the least rank the next progression may start at
        for (uint64_t k = 0; k < intervals; ++k) {
          const size_t at = in.offset();
          const uint64_t gap = in.varint("progression start");
          const uint64_t more = in.varint("progression count");
          const uint64_t stride = in.varint("progression stride");
          const auto world = static_cast<uint64_t>(header.world_size);
          // first + more * stride < world, without overflow. A lone rank is written with stride 1,
          // which a world of one rank must accept too.
          const bool stride_fits = more == 0 ? stride == 1 : stride != 0 && stride < world;
          if (gap >= world || static_cast<uint64_t>(after) + gap >= world || !stride_fits ||
              more > (world - 1 - static_cast<uint64_t>(after) - gap) / stride)
            in.fail_at(at, fmt::format("block {}'s ranks reach beyond the world of {}", next, header.world_size));
          const auto first = static_cast<int32_t>(after + static_cast<int64_t>(gap));
          table.intervals.push_back({first, static_cast<int32_t>(first + static_cast<int64_t>(more * stride)),
                                     static_cast<int32_t>(stride)});
          after = static_cast<int64_t>(table.intervals.back().last) + 1;
        }
        block.intervals_end = static_cast<uint32_t>(table.intervals.size());
        first_op += block.ops;
      }
    }
  }
  if (offset != blocks_end)
    in.fail_at(count_at, fmt::format("the blocks take {} bytes, the header announces {}",
                                     offset - header.blocks_offset(), header.blocks_length));
  if (in.remaining() != 0) in.fail(fmt::format("{} unread bytes at the end of the block table", in.remaining()));
  return table;
}

std::vector<ChunkEntry> parse_chunk_table(std::span<const uint8_t> bytes, const std::string& source,
                                          size_t base, const Head& head, const HeaderV7& header) {
  ByteReader in(bytes, source, base);
  const uint64_t count = in.count(12, "chunk count");  // first, span, entries, length, checksum
  std::vector<ChunkEntry> chunks(count);
  uint64_t offset = header.chunks_offset();
  const uint64_t chunks_end = header.chunks_offset() + header.chunks_length();
  int64_t after = 0;  // the least rank the next chunk may start at
  for (size_t c = 0; c < chunks.size(); ++c) {
    ChunkEntry& chunk = chunks[c];
    chunk.entry_at = in.offset();
    const uint64_t gap = in.varint("chunk start");
    const uint64_t span = in.varint("chunk rank count");
    if (gap > kMaxRank || span == 0 || span > kMaxRank || after + static_cast<int64_t>(gap + span) > header.world_size)
      in.fail_at(chunk.entry_at, fmt::format("chunk {}'s ranks are none or reach beyond the world of {}", c,
                                             header.world_size));
    if (head.rank_names && gap != 0)
      in.fail_at(chunk.entry_at, fmt::format("chunk {} leaves ranks out, whose names the plan holds", c));
    chunk.first_rank = static_cast<int32_t>(after + static_cast<int64_t>(gap));
    chunk.span = span;
    after = chunk.first_rank + static_cast<int64_t>(span);
    const size_t entries_at = in.offset();
    chunk.entries = in.varint("chunk entry count");
    if (chunk.entries == 0 || chunk.entries > span || chunk.entries > kChunkEntries ||
        (head.rank_names && chunk.entries != span) || (span > 1 && chunk.entries == 1))
      in.fail_at(entries_at, fmt::format("chunk {} of {} ranks holds {} entries", c, span, chunk.entries));
    const size_t length_at = in.offset();
    chunk.length = in.varint("chunk length");
    if (chunk.length < 2 * chunk.entries || chunk.length > chunks_end - offset)
      in.fail_at(length_at, fmt::format("chunk {} of {} entries takes {} bytes: fewer than 2 per entry, or more "
                                        "than the {} bytes of chunks left",
                                        c, chunk.entries, chunk.length, chunks_end - offset));
    chunk.offset = offset;
    offset += chunk.length;
    chunk.checksum = in.fixed64("chunk checksum");
  }
  if (head.rank_names && after != header.world_size)
    in.fail(fmt::format("the chunks name {} ranks of the {}", after, header.world_size));
  if (offset != chunks_end)
    in.fail(fmt::format("the chunks take {} bytes, the header leaves {} for them", offset - header.chunks_offset(),
                        header.chunks_length()));
  if (in.remaining() != 0) in.fail(fmt::format("{} unread bytes at the end of the chunk table", in.remaining()));
  return chunks;
}

const ChunkEntry* chunk_of(const std::vector<ChunkEntry>& chunks, int32_t rank) {
  auto after = std::upper_bound(chunks.begin(), chunks.end(), rank,
                                [](int32_t r, const ChunkEntry& chunk) { return r < chunk.first_rank; });
  if (after == chunks.begin()) return nullptr;
  const ChunkEntry& chunk = *std::prev(after);
  return static_cast<uint64_t>(rank - chunk.first_rank) < chunk.span ? &chunk : nullptr;
}

ChunkReader::ChunkReader(std::span<const uint8_t> bytes, const std::string& source, const ChunkEntry& chunk,
                         bool names)
    : in_(bytes, source, chunk.offset), chunk_(chunk), names_(names) {}

bool ChunkReader::next(RankEntry& entry) {
  if (read_ == chunk_.entries) {
    if (in_.remaining() != 0) in_.fail(fmt::format("{} unread bytes at the end of the chunk", in_.remaining()));
    if (last_rank_ != chunk_.first_rank + static_cast<int64_t>(chunk_.span) - 1)
      in_.fail(fmt::format("the chunk's last entry is rank {}, not the last of its {} ranks from {}", last_rank_,
                           chunk_.span, chunk_.first_rank));
    return false;
  }
  const size_t at = in_.offset();
  const uint64_t gap = in_.varint("entry rank");
  const int64_t rank = (read_ == 0 ? chunk_.first_rank : last_rank_ + 1) + static_cast<int64_t>(std::min(gap, kMaxRank + 1));
  if ((read_ == 0 && gap != 0) || (names_ && gap != 0) || rank >= chunk_.first_rank + static_cast<int64_t>(chunk_.span))
    in_.fail_at(at, fmt::format("entry {} of the chunk of ranks {} to {} is out of place", read_, chunk_.first_rank,
                                chunk_.first_rank + static_cast<int64_t>(chunk_.span) - 1));
  entry.rank = static_cast<int32_t>(rank);
  entry.name.clear();
  if (names_) entry.name = in_.utf8_string(fmt::format("rank name {}", rank));
  entry.ops = in_.varint("rank op count");
  entry.digest = entry.ops > 0 ? in_.fixed64("rank digest") : 0;
  if (entry.ops == 0 && !names_)
    in_.fail_at(at, fmt::format("rank {}'s entry holds neither a name nor ops", rank));
  last_rank_ = rank;
  ++read_;
  return true;
}

std::vector<RankInterval> rank_progressions(std::vector<int32_t>& ranks) {
  if (ranks.empty()) return {};
  // Sorted and unique: through a bitmap over their range where that is narrow (a block's ranks
  // mostly are), else by sorting.
  const auto [low, high] = std::minmax_element(ranks.begin(), ranks.end());
  const uint64_t range = static_cast<uint64_t>(*high - *low) + 1;
  if (range <= 64 * ranks.size()) {
    const int32_t base = *low;
    std::vector<uint64_t> bits((range + 63) / 64, 0);
    for (int32_t r : ranks) bits[static_cast<size_t>(r - base) / 64] |= uint64_t{1} << ((r - base) % 64);
    ranks.clear();
    for (size_t w = 0; w < bits.size(); ++w)
      for (uint64_t word = bits[w]; word != 0; word &= word - 1)
        ranks.push_back(base + static_cast<int32_t>(64 * w + static_cast<size_t>(std::countr_zero(word))));
  } else {
    std::sort(ranks.begin(), ranks.end());
    ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  }
  // Runs of equal steps, greedily: each takes the next rank and as many after it as keep the step.
  std::vector<RankInterval> runs;
  for (size_t i = 0; i < ranks.size() && runs.size() <= kMaxBlockIntervals;) {
    RankInterval run{ranks[i], ranks[i], 1};
    size_t j = i + 1;
    if (j < ranks.size()) {
      run.stride = ranks[j] - ranks[i];
      while (j + 1 < ranks.size() && ranks[j + 1] - ranks[j] == run.stride) ++j;
      run.last = ranks[j];
      ++j;
    }
    runs.push_back(run);
    i = j;
  }
  if (runs.size() <= kMaxBlockIntervals) return runs;  // exact
  // Too many: cut the ranks at the kMaxBlockIntervals - 1 widest gaps (the earliest among equal
  // ones), and give each part the largest stride that holds all of its ranks.
  std::vector<size_t> gaps(ranks.size() - 1);  // gap i: between ranks i and i + 1
  std::iota(gaps.begin(), gaps.end(), size_t{0});
  const auto width = [&](size_t i) { return ranks[i + 1] - ranks[i]; };
  std::nth_element(gaps.begin(), gaps.begin() + (kMaxBlockIntervals - 1), gaps.end(),
                   [&](size_t a, size_t b) { return width(a) != width(b) ? width(a) > width(b) : a < b; });
  gaps.resize(kMaxBlockIntervals - 1);
  std::sort(gaps.begin(), gaps.end());
  gaps.push_back(ranks.size() - 1);
  std::vector<RankInterval> parts;
  size_t start = 0;
  for (size_t end : gaps) {
    int32_t stride = 0;
    for (size_t i = start + 1; i <= end && stride != 1; ++i) stride = std::gcd(stride, ranks[i] - ranks[start]);
    parts.push_back({ranks[start], ranks[end], std::max(stride, 1)});
    start = end + 1;
  }
  return parts;
}

uint64_t section_checksum(std::span<const uint8_t> bytes) {
  constexpr uint64_t kPrime = 0x100000001b3ULL;
  uint64_t h = 0xcbf29ce484222325ULL;
  size_t i = 0;
  for (; i + 8 <= bytes.size(); i += 8) {
    uint64_t word;
    std::memcpy(&word, bytes.data() + i, 8);
    if constexpr (std::endian::native == std::endian::big) word = __builtin_bswap64(word);
    h = (h ^ word) * kPrime;
    h ^= h >> 29;  // the high bits reach the low ones: two flips of a word's top bit do not cancel
  }
  for (; i < bytes.size(); ++i) h = (h ^ bytes[i]) * kPrime;
  return h;
}

uint64_t step_key(uint64_t schedule, uint64_t step) {
  return splitmix64(splitmix64(schedule ^ 0x5bd1e9955bd1e995ULL) ^ step);
}

uint64_t op_key(uint64_t step_key, uint64_t op) { return splitmix64(step_key + op); }

uint64_t participation_hash(uint64_t key, uint64_t position) { return splitmix64(key + position); }

RankTally::RankTally(int32_t world_size, uint64_t expected_adds) : world_size_(world_size) {
  if (world_size > 0 && static_cast<uint64_t>(world_size) <= 4 * expected_adds + 4096)
    table_.assign(static_cast<size_t>(world_size), Slot{});
}

void RankTally::add(int32_t rank, uint64_t hash) {
  if (rank < 0 || rank >= world_size_) return;
  if (!table_.empty()) {
    Slot& slot = table_[static_cast<size_t>(rank)];
    ++slot.ops;
    slot.digest += hash;
  } else {
    added_.emplace_back(rank, hash);
  }
}

std::vector<RankTally::Total> RankTally::totals() && {
  std::vector<Total> totals;
  if (!table_.empty()) {
    for (size_t r = 0; r < table_.size(); ++r)
      if (table_[r].ops > 0) totals.push_back({static_cast<int32_t>(r), table_[r].ops, table_[r].digest});
    return totals;
  }
  std::sort(added_.begin(), added_.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (const auto& [rank, hash] : added_) {
    if (totals.empty() || totals.back().rank != rank) totals.push_back({rank, 0, 0});
    ++totals.back().ops;
    totals.back().digest += hash;
  }
  return totals;
}

namespace {

void put_u64(std::vector<uint8_t>& bytes, size_t at, uint64_t value) {
  for (int i = 0; i < 8; ++i) bytes[at + i] = static_cast<uint8_t>(value >> (8 * i));
}

// Rewrites the checksums in a block or chunk table (`table`, at `table_at` in `bytes`) of
// `sections` sections starting at `first_offset`; `entry` reads the fields of an entry up to its
// checksum and returns the section's length, then `after` reads what follows the checksum.
template <typename Before, typename After>
void reseal_table(std::vector<uint8_t>& bytes, uint64_t table_at, uint64_t table_length, uint64_t offset,
                  Before before, After after) {
  const std::string source = "reseal";
  try {
    const std::vector<uint8_t> copy(bytes.begin() + static_cast<std::ptrdiff_t>(table_at),
                                    bytes.begin() + static_cast<std::ptrdiff_t>(table_at + table_length));
    ByteReader in(copy, source, table_at);
    const uint64_t count = in.varint("count");
    for (uint64_t i = 0; i < count; ++i) {
      const uint64_t length = before(in);
      const size_t checksum_at = in.offset();
      in.fixed64("checksum");
      if (length <= bytes.size() && offset <= bytes.size() - length)
        put_u64(bytes, checksum_at,
                section_checksum(std::span<const uint8_t>(bytes).subspan(offset, length)));
      offset += length;
      after(in);
    }
  } catch (const PlanFormatError&) {
    // As far as the table can be read.
  }
}

}  // namespace

void mark_verified(std::vector<uint8_t>& bytes) {
  bytes.at(kFlagsOffset) |= kFlagVerified;
  put_u64(bytes, kHeaderChecksumOffset, fnv1a64(std::span<const uint8_t>(bytes).first(kHeaderChecksumOffset)));
}

void reseal_plan(std::vector<uint8_t>& bytes) {
  if (bytes.size() < kVersionOffset + 4) return;
  uint32_t format = 0;
  for (int i = 0; i < 4; ++i) format |= static_cast<uint32_t>(bytes[kVersionOffset + i]) << (8 * i);
  const std::span<const uint8_t> all(bytes);
  if (format == kOldestPlanFormat) {
    if (bytes.size() < kHeaderSizeV6) return;
    put_u64(bytes, kChecksumOffsetV6,
            fnv1a64(all.subspan(kHeaderSizeV6), fnv1a64(all.first(kChecksumOffsetV6))));
    return;
  }
  if (format != kPlanFormatVersion || bytes.size() < kHeaderSizeV7) return;
  const uint64_t head = read_u64(bytes, kHeadLengthOffset), block_table = read_u64(bytes, kBlockTableLengthOffset),
                 chunk_table = read_u64(bytes, kChunkTableLengthOffset), blocks = read_u64(bytes, kBlocksLengthOffset);
  const uint64_t room = bytes.size() - kHeaderSizeV7;
  const bool fits = head <= room && block_table <= room - head && chunk_table <= room - head - block_table &&
                    blocks <= room - head - block_table - chunk_table;
  if (fits) {
    const uint64_t tables_end = kHeaderSizeV7 + head + block_table + chunk_table;
    reseal_table(
        bytes, kHeaderSizeV7 + head, block_table, tables_end,
        [](ByteReader& in) {
          in.varint("ops");
          return in.varint("length");
        },
        [](ByteReader& in) {
          const uint64_t intervals = in.varint("progressions");
          for (uint64_t k = 0; k < intervals && k < (uint64_t{1} << 20); ++k) {
            in.varint("start");
            in.varint("count");
            in.varint("stride");
          }
        });
    reseal_table(
        bytes, kHeaderSizeV7 + head + block_table, chunk_table, tables_end + blocks,
        [](ByteReader& in) {
          in.varint("start");
          in.varint("ranks");
          in.varint("entries");
          return in.varint("length");
        },
        [](ByteReader&) {});
    put_u64(bytes, kFingerprintOffset,
            tables_fingerprint(all.first(kHeaderSizeV7), all.subspan(kHeaderSizeV7, head + block_table + chunk_table)));
  }
  put_u64(bytes, kHeaderChecksumOffset, fnv1a64(all.first(kHeaderChecksumOffset)));
}

}  // namespace flexplan::ir::detail
