// plan.bin: a 60-byte little-endian header, then the varint-coded payload.
//
//   offset size field
//        0    8 magic "FLXPLAN\0"
//        8    4 format version (kPlanFormatVersion)
//       12    4 flags: bit 0 set when the plan names a topology hash; other bits zero
//       16   16 flexplan version that wrote the file, ASCII, NUL-padded
//       32    8 topology hash (0 without one)
//       40    4 world size
//       44    8 payload length
//       52    8 checksum: FNV-1a 64 over bytes [0,52) and then the payload
#include "ir/plan_binary.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <future>
#include <limits>
#include <optional>
#include <span>
#include <thread>

#include "flexplan/version.hpp"
#include "ir/byte_io.hpp"
#include "ir/file_bytes.hpp"
#include "ir/pipeline_form.hpp"
#include "ir/verify.hpp"

namespace flexplan::ir {

namespace {

constexpr char kMagic[8] = {'F', 'L', 'X', 'P', 'L', 'A', 'N', '\0'};
constexpr size_t kVersionField = 16;
constexpr size_t kFlagsOffset = 12;
constexpr size_t kTopologyHashOffset = 32;
constexpr size_t kPayloadLengthOffset = 44;
constexpr size_t kChecksumOffset = 52;
constexpr size_t kHeaderSize = 60;
constexpr uint32_t kFlagTopologyHash = 1;
constexpr uint64_t kMaxRank = std::numeric_limits<int32_t>::max();
static_assert(std::string_view(kVersion).size() < kVersionField,
              "version string must fit its field");

// Ops are coded relative to the op before them in the same step (the first to an empty op at
// 0): a step's ops usually follow each other through the units, from neighbouring roots, and
// neighbouring ops of a tree level share most of their group (docs/ir.md, "plan.bin").
struct OpContext {
  uint64_t end = 0;
  int32_t root = 0;
  const RankList* group = nullptr;
};

constexpr uint64_t kGroupList = 0, kGroupEdits = 1;

// The positions where `group` differs from `previous`, when the edit form is the shorter.
bool edit_positions(const RankList& group, const RankList* previous,
                    std::vector<size_t>& positions) {
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

void encode_op(detail::ByteWriter& out, const Op& op, OpContext& previous,
               std::vector<size_t>& positions) {
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

void encode_payload(detail::ByteWriter& out, const Plan& plan) {
  out.string(plan.topology_name);
  out.varint(plan.rank_names.size());
  for (const std::string& name : plan.rank_names) out.string(name);
  out.varint(plan.schedules.size());
  std::vector<size_t> positions;
  // What each schedule wrote as its steps (a pipeline's base), so that a later schedule with the
  // same steps (the same algorithm at another slice count) names it instead of repeating them.
  std::vector<std::optional<PipelineBase>> recognised(plan.schedules.size());
  std::vector<const Schedule*> written_steps(plan.schedules.size(), nullptr);
  for (size_t i = 0; i < plan.schedules.size(); ++i) {
    const Schedule& schedule = plan.schedules[i];
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
    out.varint(expanded_units(schedule));
    // A pipeline is written as its base (pipeline_form.hpp): 1/slices of the size. A compact
    // one holds its base's steps already; a whole one is recognised op for op.
    // Only where the contract is the same on every unit: slices would cut a sharded one's shards.
    recognised[i] = schedule.slices == 1 && !has_shards(schedule.collective)
                        ? pipeline_base(schedule)
                        : std::nullopt;
    const auto& pipeline = recognised[i];
    out.varint(pipeline ? pipeline->slices : schedule.slices);
    const Schedule& written = pipeline ? pipeline->base : schedule;
    written_steps[i] = &written;
    size_t same = 0;  // how many schedules back the same steps were written; 0: none
    for (size_t j = 0; j < i && same == 0 && !written.steps.empty(); ++j)
      if (written_steps[j]->units == written.units && written_steps[j]->steps == written.steps) same = i - j;
    out.varint(same);
    if (same != 0) continue;
    out.varint(written.steps.size());
    for (const Step& step : written.steps) {
      out.varint(static_cast<uint64_t>(step.phase));
      out.signed_varint(step.level);
      out.varint(step.ops.size());
      OpContext previous;
      for (const Op& op : step.ops) encode_op(out, op, previous, positions);
    }
  }
}

// A rank coded as a difference from `base`: it must land in [0, 2^31).
int32_t decode_rank(detail::ByteReader& in, int64_t base, const char* what) {
  const size_t at = in.offset();
  const int64_t delta = in.signed_varint(what);
  // base is in [0, 2^31), so base + delta overflows only if the result is out of range anyway.
  if (delta < -base || delta > static_cast<int64_t>(kMaxRank) - base)
    in.fail_at(at, fmt::format("{} {} {:+} is not a rank (0 to {})", what, base, delta, kMaxRank));
  return static_cast<int32_t>(base + delta);
}

// An op in the group-edits form repeats the group before it for a few bytes, so a file could
// claim far more group members than it has bytes. Plans flexplan writes hold at most about 1.3
// members per payload byte (docs/ir.md); a file may hold 64 per byte, plus a million.
constexpr uint64_t kGroupMembersPerByte = 64, kGroupMembersAnyway = uint64_t{1} << 20;
struct GroupMemberBudget {
  uint64_t left;
  uint64_t payload_bytes;
  void spend(detail::ByteReader& in, size_t at, size_t members) {
    if (members > left)
      in.fail_at(at, fmt::format("the ops' groups hold more members than a payload of {} bytes may "
                                 "({} per byte, plus {})",
                                 payload_bytes, kGroupMembersPerByte, kGroupMembersAnyway));
    left -= members;
  }
};

// Decodes into `op` in place (a step's ops are sized first), so that no op is built and moved.
void decode_op(detail::ByteReader& in, Op& op, const Op* previous, GroupMemberBudget& members) {
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
      in.fail_at(in.offset(), fmt::format("{} group edits for a group of {}", edits,
                                          op.group.size()));
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

void decode_step(detail::ByteReader& in, Step& step, GroupMemberBudget& members) {
  step.phase = static_cast<Phase>(in.varint_at_most(static_cast<uint64_t>(Phase::Broadcast), "phase"));
  const size_t level_at = in.offset();
  const int64_t level = in.signed_varint("level");
  if (level < std::numeric_limits<int32_t>::min() || level > std::numeric_limits<int32_t>::max())
    in.fail_at(level_at, fmt::format("level {} does not fit in 32 bits", level));
  step.level = static_cast<int32_t>(level);
  step.ops.resize(in.count(5, "op count"));
  for (size_t o = 0; o < step.ops.size(); ++o)
    decode_op(in, step.ops[o], o > 0 ? &step.ops[o - 1] : nullptr, members);
}

// What the schedules decoded so far wrote, for later ones that name their steps. Naming copies
// the steps, so the copies are bounded by what the file wrote out: at most kNamedCopies times
// its ops and group members (the planner names a base once per slice count, nine times at most),
// which keeps a small file from claiming a large plan.
constexpr uint64_t kNamedCopies = 16;
struct Earlier {
  std::span<const Schedule> schedules;
  std::vector<uint64_t> base_units;      // the units each one's written steps cover
  std::vector<uint64_t> ops, members;    // its steps' ops and group members
  uint64_t written_ops = 0, written_members = 0, copied_ops = 0, copied_members = 0;

  // `group_members`: what decoding the schedule spent of the budget; `named_from`: the schedule
  // whose steps it copied, if any.
  void add(const Schedule& schedule, uint64_t group_members, std::optional<size_t> named_from) {
    uint64_t step_ops = 0;
    for (const Step& step : schedule.steps) step_ops += step.ops.size();
    if (named_from) group_members = members[*named_from];
    base_units.push_back(schedule.units);
    ops.push_back(step_ops);
    members.push_back(group_members);
    (named_from ? copied_ops : written_ops) += step_ops;
    (named_from ? copied_members : written_members) += group_members;
  }
};

// `named_from`: set to the earlier schedule whose steps this one copies.
Schedule decode_schedule(detail::ByteReader& in, int32_t world_size, const Earlier& earlier,
                         std::optional<size_t>& named_from, GroupMemberBudget& members) {
  Schedule schedule;
  schedule.algorithm = in.utf8_string("algorithm name");
  schedule.collective = static_cast<Collective>(
      in.varint_at_most(kCollectiveCount - 1, "collective"));
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
  const size_t slices_at = in.offset();
  const uint64_t slices = in.varint("pipeline slices");
  const std::string suffix = fmt::format("@{}", slices);
  const std::string_view name = schedule.algorithm;
  if (slices == 0 || slices > kMaxPipelineSlices)
    in.fail_at(slices_at, fmt::format("pipeline slices {} out of range (1 to {})", slices,
                                      kMaxPipelineSlices));
  if (slices > 1 && (schedule.units % slices != 0 || name.size() <= suffix.size() ||
                     name.substr(name.size() - suffix.size()) != suffix))
    in.fail_at(slices_at, fmt::format("schedule '{}' with {} units is written as a pipeline of {} "
                                      "slices: its name must end in '{}' and its units divide "
                                      "into the slices",
                                      schedule.algorithm, schedule.units, slices, suffix));
  if (slices > 1) schedule.units /= slices;  // the base's, until expanded below
  const size_t same_at = in.offset();
  const uint64_t same = in.varint("schedules back with the same steps");
  const size_t before = earlier.schedules.size();
  if (same > before)
    in.fail_at(same_at, fmt::format("schedule '{}' takes the steps of the schedule {} back, but "
                                    "only {} come before it",
                                    schedule.algorithm, same, before));
  if (same != 0) {
    const size_t from = before - same;
    const Schedule& other = earlier.schedules[from];
    if (other.steps.empty())
      in.fail_at(same_at, fmt::format("schedule '{}' takes the steps of schedule {} ('{}'), which "
                                      "has none",
                                      schedule.algorithm, from, other.algorithm));
    if (earlier.base_units[from] != schedule.units)
      in.fail_at(same_at, fmt::format("schedule '{}' takes the steps of schedule {} ('{}'), whose "
                                      "{} units differ from its {}",
                                      schedule.algorithm, from, other.algorithm,
                                      earlier.base_units[from], schedule.units));
    if (earlier.copied_ops + earlier.ops[from] > kNamedCopies * earlier.written_ops ||
        earlier.copied_members + earlier.members[from] > kNamedCopies * earlier.written_members)
      in.fail_at(same_at, fmt::format("schedule '{}' takes the steps of schedule {} ('{}'): the "
                                      "plan's named steps would copy more than {} times the {} ops "
                                      "and {} group members written out",
                                      schedule.algorithm, from, other.algorithm, kNamedCopies,
                                      earlier.written_ops, earlier.written_members));
    schedule.steps = other.steps;
    named_from = from;
  } else {
    schedule.steps.resize(in.count(3, "step count"));
    for (Step& step : schedule.steps.edit()) decode_step(in, step, members);
  }
  if (slices == 1) return schedule;
  // Slice j moves the base's ranges up by j x its units: a base range beyond them would reach
  // into the next slice, or past 2^64 (a plan the verifier refuses, but whose expansion the
  // printers would write with wrapped ranges).
  for (size_t s = 0; s < schedule.steps.size(); ++s)
    for (size_t o = 0; o < schedule.steps[s].ops.size(); ++o)
      if (const Op& op = schedule.steps[s].ops[o]; op.end > schedule.units)
        in.fail_at(slices_at, fmt::format("schedule '{}': op {} of its base's step {} covers units "
                                          "[{}, {}), beyond the base's {}",
                                          name, o, s, op.begin, op.end, schedule.units));
  // The planner keeps to the same limits (pipeline_form.hpp).
  const std::string beyond = pipeline_beyond_limits(pipeline_footprint(schedule, world_size), slices);
  if (!beyond.empty())
    in.fail_at(slices_at, fmt::format("schedule '{}': a pipeline of {} slices larger than plan.bin allows: {}",
                                      name, slices, beyond));
  // Kept compact, as written: whoever needs it whole calls materialize (pipeline_form.hpp). A
  // base without steps is its whole expansion already (as compact_pipeline gives it).
  if (schedule.steps.empty()) {
    schedule.algorithm.resize(name.size() - suffix.size());
    return expand_pipeline(schedule, static_cast<uint32_t>(slices));
  }
  schedule.slices = static_cast<uint32_t>(slices);
  return schedule;
}

bool parse_hash_hex(const std::string& text, uint64_t& value) {
  if (text.size() != 16) return false;
  value = 0;
  for (char c : text) {
    if (c >= '0' && c <= '9')
      value = value << 4 | static_cast<uint64_t>(c - '0');
    else if (c >= 'a' && c <= 'f')
      value = value << 4 | static_cast<uint64_t>(c - 'a' + 10);
    else
      return false;
  }
  return true;
}

std::string read_version_field(std::span<const uint8_t> field) {
  std::string version;
  for (uint8_t byte : field) {
    if (byte == 0) break;
    version.push_back(static_cast<char>(byte));
  }
  return version;
}

// The fingerprint's starting value: the header fields that are part of the plan (flags, topology
// hash, world size); the writer's version, the payload length and the checksum are not.
uint64_t fingerprint_seed(std::span<const uint8_t> header) {
  uint64_t seed = detail::fnv1a64(header.subspan(kFlagsOffset, 4));
  return detail::fnv1a64(header.subspan(kTopologyHashOffset, kPayloadLengthOffset - kTopologyHashOffset),
                         seed);
}

}  // namespace

bool has_plan_magic(std::span<const uint8_t> bytes) {
  if (bytes.empty()) return false;
  const size_t compared = std::min(bytes.size(), sizeof kMagic);
  return std::memcmp(bytes.data(), kMagic, compared) == 0;
}

std::vector<uint8_t> encode_plan(const Plan& plan) {
  const bool has_hash = !plan.topology_hash.empty();
  uint64_t hash = 0;
  if (has_hash && !parse_hash_hex(plan.topology_hash, hash)) {
    throw PlanFormatError(
        fmt::format("plan: topology hash '{}' is not 16 lowercase hex digits", plan.topology_hash));
  }
  if (plan.world_size < 1)
    throw PlanFormatError(fmt::format("plan: world size {} must be at least 1", plan.world_size));

  // The header with the payload length and checksum left at 0, the payload after it, then
  // those two fields filled in.
  detail::ByteWriter out;
  out.bytes(kMagic, sizeof kMagic);
  out.fixed32(kPlanFormatVersion);
  out.fixed32(has_hash ? kFlagTopologyHash : 0);
  char version[kVersionField] = {};
  std::memcpy(version, kVersion, std::string_view(kVersion).size());
  out.bytes(version, sizeof version);
  out.fixed64(hash);
  out.fixed32(static_cast<uint32_t>(plan.world_size));
  out.fixed64(0);  // payload length
  out.fixed64(0);  // checksum
  encode_payload(out, plan);
  std::vector<uint8_t>& bytes = out.buffer();
  auto put = [&](size_t at, uint64_t value) {
    for (int i = 0; i < 8; ++i) bytes[at + i] = static_cast<uint8_t>(value >> (8 * i));
  };
  put(kPayloadLengthOffset, bytes.size() - kHeaderSize);
  const std::span<const uint8_t> all(bytes);
  put(kChecksumOffset,
      detail::fnv1a64(all.subspan(kHeaderSize), detail::fnv1a64(all.first(kChecksumOffset))));
  return std::move(bytes);
}

uint64_t plan_fingerprint(const Plan& plan) {
  const std::vector<uint8_t> bytes = encode_plan(plan);
  const std::span<const uint8_t> all(bytes);
  return detail::fnv1a64(all.subspan(kHeaderSize), fingerprint_seed(all));
}

Plan decode_plan_unverified(std::span<const uint8_t> bytes, const std::string& source) {
  return decode_fingerprinted_plan(bytes, source).plan;
}

FingerprintedPlan decode_fingerprinted_plan(std::span<const uint8_t> bytes,
                                            const std::string& source) {
  detail::ByteReader header(bytes, source);
  if (bytes.empty()) header.fail_at(0, "the file is empty, not a plan.bin");
  if (bytes.size() < sizeof kMagic) {
    const bool prefix = std::memcmp(bytes.data(), kMagic, bytes.size()) == 0;
    header.fail_at(0, prefix ? fmt::format("truncated: {} bytes, shorter than the {}-byte header",
                                           bytes.size(), kHeaderSize)
                             : std::string("not a flexplan plan.bin (bad magic)"));
  }
  if (std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0)
    header.fail_at(0, "not a flexplan plan.bin (bad magic)");
  header.bytes(sizeof kMagic, "magic");
  const uint32_t format = header.fixed32("format version");
  if (format != kPlanFormatVersion) {
    header.fail_at(8, fmt::format("plan.bin format version {} is not supported (this flexplan {} "
                                  "reads version {})",
                                  format, kVersion, kPlanFormatVersion));
  }
  if (bytes.size() < kHeaderSize) {
    header.fail_at(bytes.size(), fmt::format("truncated: {} bytes, shorter than the {}-byte header",
                                             bytes.size(), kHeaderSize));
  }
  const uint32_t flags = header.fixed32("flags");
  const std::string writer_version =
      read_version_field(header.bytes(kVersionField, "flexplan version"));
  const uint64_t topology_hash = header.fixed64("topology hash");
  const uint32_t world_size = header.fixed32("world size");
  const uint64_t payload_length = header.fixed64("payload length");
  const uint64_t stored_checksum = header.fixed64("checksum");

  const size_t available = bytes.size() - kHeaderSize;
  if (payload_length > available) {
    header.fail_at(bytes.size(),
                   fmt::format("truncated: the header announces a {}-byte payload but "
                               "only {} bytes follow it",
                               payload_length, available));
  }
  if (payload_length < available) {
    header.fail_at(kHeaderSize + payload_length,
                   fmt::format("{} trailing bytes after the {}-byte payload",
                               available - payload_length, payload_length));
  }
  const auto payload = bytes.subspan(kHeaderSize);
  const auto [checksum, fingerprint] = detail::fnv1a64_twice(
      payload, detail::fnv1a64(bytes.first(kChecksumOffset)), fingerprint_seed(bytes));
  if (checksum != stored_checksum) {
    header.fail_at(
        kChecksumOffset,
        fmt::format("checksum mismatch (stored {:016x}, content gives {:016x}): the file "
                    "is corrupted (written by flexplan '{}')",
                    stored_checksum, checksum, writer_version));
  }
  if (flags & ~kFlagTopologyHash) header.fail_at(12, fmt::format("unknown flags {:#x}", flags));
  // Kept canonical: the fingerprint covers this field.
  if (!(flags & kFlagTopologyHash) && topology_hash != 0)
    header.fail_at(kTopologyHashOffset, fmt::format("topology hash {:016x} without the flag that "
                                                    "announces one",
                                                    topology_hash));
  if (world_size < 1 || world_size > kMaxRank)
    header.fail_at(40, fmt::format("world size {} is out of range", world_size));

  Plan plan;
  plan.world_size = static_cast<int32_t>(world_size);
  if (flags & kFlagTopologyHash) plan.topology_hash = fmt::format("{:016x}", topology_hash);

  detail::ByteReader in(payload, source, kHeaderSize);
  plan.topology_name = in.utf8_string("topology name");
  const size_t names_at = in.offset();
  plan.rank_names.resize(in.count(1, "rank name count"));
  if (!plan.rank_names.empty() && plan.rank_names.size() != world_size) {
    in.fail_at(names_at, fmt::format("{} rank names for a world size of {}", plan.rank_names.size(),
                                     world_size));
  }
  for (size_t rank = 0; rank < plan.rank_names.size(); ++rank)
    plan.rank_names[rank] = in.utf8_string(fmt::format("rank name {}", rank));
  plan.schedules.resize(in.count(6, "schedule count"));
  Earlier earlier;
  GroupMemberBudget members{kGroupMembersPerByte * payload.size() + kGroupMembersAnyway, payload.size()};
  for (size_t i = 0; i < plan.schedules.size(); ++i) {
    earlier.schedules = std::span(plan.schedules).first(i);
    std::optional<size_t> named_from;
    const uint64_t members_left = members.left;
    plan.schedules[i] = decode_schedule(in, plan.world_size, earlier, named_from, members);
    earlier.add(plan.schedules[i], members_left - members.left, named_from);
  }
  if (in.remaining() != 0)
    in.fail(fmt::format("{} unread bytes at the end of the payload", in.remaining()));
  return {std::move(plan), fingerprint};
}

Plan decode_plan(std::span<const uint8_t> bytes, const std::string& source) {
  Plan plan = decode_plan_unverified(bytes, source);
  verify_plan(plan);
  return plan;
}

void write_plan_file(const std::string& path, const Plan& plan) {
  // Encoded on a thread of its own while the plan is verified (both only read it; all five
  // collectives at 10k learners: tenths of a second each); nothing is written unless it verifies.
  std::future<std::vector<uint8_t>> encoded = std::async(
      std::thread::hardware_concurrency() >= 2 ? std::launch::async : std::launch::deferred,
      [&plan] { return encode_plan(plan); });
  verify_plan(plan);
  const std::vector<uint8_t> bytes = encoded.get();
  // Write beside the target and rename, so a reader never sees half a plan.
  const std::string temporary = path + ".tmp";
  {
    std::ofstream file(temporary, std::ios::binary | std::ios::trunc);
    if (!file)
      throw PlanFormatError(fmt::format("{}: cannot write: {}", temporary, std::strerror(errno)));
    file.write(reinterpret_cast<const char*>(bytes.data()),
               static_cast<std::streamsize>(bytes.size()));
    file.close();
    if (!file)
      throw PlanFormatError(fmt::format("{}: write failed: {}", temporary, std::strerror(errno)));
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    const int error = errno;
    std::remove(temporary.c_str());
    throw PlanFormatError(fmt::format("{}: cannot write: {}", path, std::strerror(error)));
  }
}

Plan read_plan_file(const std::string& path) {
  return decode_plan(read_plan_bytes(path), path);
}

std::vector<uint8_t> read_plan_bytes(const std::string& path) {
  detail::FileReader file(path);
  return read_plan_bytes(file);
}

std::vector<uint8_t> read_plan_bytes(detail::FileReader& file) {
  const std::span<const uint8_t> head = file.read_to(kHeaderSize);
  // A short file, a bad magic or another version: the header alone fails decoding just as the
  // whole file would (those checks come first), and nothing more is read.
  const bool header_usable =
      head.size() == kHeaderSize && std::memcmp(head.data(), kMagic, sizeof kMagic) == 0 &&
      detail::ByteReader(head.subspan(sizeof kMagic), file.path()).fixed32("format version") ==
          kPlanFormatVersion;
  if (!header_usable) {
    decode_fingerprinted_plan(head, file.path());
    return file.take();  // not reached: decoding a header alone always fails
  }
  detail::ByteReader header(head.subspan(kPayloadLengthOffset), file.path(), kPayloadLengthOffset);
  const uint64_t payload_length = header.fixed64("payload length");
  if (const auto size = file.size(); size && *size >= kHeaderSize) {
    const uint64_t available = *size - kHeaderSize;
    if (payload_length > available)
      header.fail_at(*size, fmt::format("truncated: the header announces a {}-byte payload but "
                                        "only {} bytes follow it",
                                        payload_length, available));
    if (payload_length < available)
      header.fail_at(kHeaderSize + payload_length,
                     fmt::format("{} trailing bytes after the {}-byte payload",
                                 available - payload_length, payload_length));
  }
  // At most one byte past the announced payload: enough for the decoder to report trailing
  // bytes, and a pipe is never read on unbounded.
  const uint64_t announced = std::min<uint64_t>(payload_length, UINT64_MAX - kHeaderSize - 1);
  file.read_to(kHeaderSize + announced + 1);
  return file.take();
}

}  // namespace flexplan::ir
