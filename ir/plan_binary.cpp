// plan.bin, format 7: a 100-byte little-endian header, then five sections (docs/ir.md has the
// byte layout):
//
//   header        magic, version, flags, writer, topology hash, world size, payload length,
//                 the fingerprint, the lengths of the first four sections, a header checksum
//   head          the topology name and every schedule's fields and steps, without their ops
//   block table   per block (a step's ops, coded from an empty op): ops, length, checksum, and
//                 the ranks of its ops as intervals
//   chunk table   per chunk of per-rank entries: its ranks, length, checksum
//   blocks        the ops
//   chunks        per rank: its name, and how many ops it takes part in with their digest
//
// The fingerprint is FNV-1a 64 over the header's plan fields, the head and the two tables, which
// hold the checksum of every block and chunk: it covers the whole plan, and a rank that reads
// only its own blocks (plan_slice.hpp) can still check it. Format 6 files (one checksum over a
// payload coded without blocks) are read whole.
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
#include "ir/plan_sections.hpp"
#include "ir/verify.hpp"

namespace flexplan::ir {

namespace {

using namespace detail;

static_assert(std::string_view(kVersion).size() < kVersionField, "version string must fit its field");

void put_u64(std::vector<uint8_t>& bytes, size_t at, uint64_t value) {
  for (int i = 0; i < 8; ++i) bytes[at + i] = static_cast<uint8_t>(value >> (8 * i));
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

// The header fields both formats share, up to the world size; the rest left at 0.
void write_header_start(ByteWriter& out, const Plan& plan, uint32_t format) {
  const bool has_hash = !plan.topology_hash.empty();
  uint64_t hash = 0;
  if (has_hash && !parse_hash_hex(plan.topology_hash, hash)) {
    throw PlanFormatError(
        fmt::format("plan: topology hash '{}' is not 16 lowercase hex digits", plan.topology_hash));
  }
  if (plan.world_size < 1)
    throw PlanFormatError(fmt::format("plan: world size {} must be at least 1", plan.world_size));
  out.bytes(kPlanMagic, sizeof kPlanMagic);
  out.fixed32(format);
  out.fixed32(has_hash ? kFlagTopologyHash : 0);
  char version[kVersionField] = {};
  std::memcpy(version, kVersion, std::string_view(kVersion).size());
  out.bytes(version, sizeof version);
  out.fixed64(hash);
  out.fixed32(static_cast<uint32_t>(plan.world_size));
}

// What the encoder writes for each schedule: the steps (a pipeline's base, when the schedule is
// one), and how many schedules back the same steps were written (0: none, they are written).
struct WrittenForm {
  std::optional<PipelineBase> pipeline;
  const Schedule* written = nullptr;
  uint64_t slices = 1;
  uint64_t same = 0;
};
std::vector<WrittenForm> written_forms(const Plan& plan) {
  std::vector<WrittenForm> forms(plan.schedules.size());
  for (size_t i = 0; i < plan.schedules.size(); ++i) {
    const Schedule& schedule = plan.schedules[i];
    WrittenForm& form = forms[i];
    // A pipeline is written as its base (pipeline_form.hpp): 1/slices of the size. A compact
    // one holds its base's steps already; a whole one is recognised op for op. Only where the
    // contract is the same on every unit: slices would cut a sharded one's shards.
    form.pipeline = schedule.slices == 1 && !has_shards(schedule.collective) ? pipeline_base(schedule)
                                                                              : std::nullopt;
    form.written = form.pipeline ? &form.pipeline->base : &schedule;
    form.slices = form.pipeline ? form.pipeline->slices : schedule.slices;
    // A later schedule with the same steps (the same algorithm at another slice count) names
    // the first that wrote them instead of repeating them.
    for (size_t j = 0; j < i && form.same == 0 && !form.written->steps.empty(); ++j)
      if (forms[j].written->units == form.written->units && forms[j].written->steps == form.written->steps)
        form.same = i - j;
  }
  return forms;
}

// ---- Format 6, read whole (and written by encode_plan_version6, for tests).

void encode_payload_v6(ByteWriter& out, const Plan& plan) {
  out.string(plan.topology_name);
  out.varint(plan.rank_names.size());
  for (const std::string& name : plan.rank_names) out.string(name);
  out.varint(plan.schedules.size());
  std::vector<size_t> positions;
  const std::vector<WrittenForm> forms = written_forms(plan);
  for (size_t i = 0; i < plan.schedules.size(); ++i) {
    const WrittenForm& form = forms[i];
    encode_schedule_fields(out, plan.schedules[i], expanded_units(plan.schedules[i]), form.slices, form.same);
    if (form.same != 0) continue;
    out.varint(form.written->steps.size());
    for (const Step& step : form.written->steps) {
      out.varint(static_cast<uint64_t>(step.phase));
      out.signed_varint(step.level);
      out.varint(step.ops.size());
      OpContext previous;
      for (const Op& op : step.ops) encode_op(out, op, previous, positions);
    }
  }
}

void decode_step_v6(ByteReader& in, Step& step, GroupMemberBudget& members) {
  step.phase = static_cast<Phase>(in.varint_at_most(static_cast<uint64_t>(Phase::Broadcast), "phase"));
  step.level = in.signed_varint32("level");
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
  std::vector<uint64_t> base_units;    // the units each one's written steps cover
  std::vector<uint64_t> ops, members;  // its steps' ops and group members
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
  // Throws when naming schedule `from` would copy beyond the bound.
  void check_copy(ByteReader& in, size_t at, const std::string& name, size_t from) const {
    if (copied_ops + ops[from] > kNamedCopies * written_ops ||
        copied_members + members[from] > kNamedCopies * written_members)
      in.fail_at(at, fmt::format("schedule '{}' takes the steps of schedule {} ('{}'): the "
                                 "plan's named steps would copy more than {} times the {} ops "
                                 "and {} group members written out",
                                 name, from, schedules[from].algorithm, kNamedCopies, written_ops,
                                 written_members));
  }
};

// A schedule whose fields and steps are read, as a pipeline of `slices` when more than 1:
// checked against the pipeline limits and kept compact (or expanded, for a base without steps).
Schedule finish_schedule(ByteReader& in, Schedule schedule, uint64_t slices, size_t slices_at, int32_t world_size) {
  if (slices == 1) return schedule;
  const std::string name = schedule.algorithm;
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
  const std::string suffix = fmt::format("@{}", slices);
  if (schedule.steps.empty()) {
    schedule.algorithm.resize(name.size() - suffix.size());
    return expand_pipeline(schedule, static_cast<uint32_t>(slices));
  }
  schedule.slices = static_cast<uint32_t>(slices);
  return schedule;
}

// `named_from`: set to the earlier schedule whose steps this one copies.
Schedule decode_schedule_v6(ByteReader& in, int32_t world_size, const Earlier& earlier,
                            std::optional<size_t>& named_from, GroupMemberBudget& members) {
  ScheduleFields fields = decode_schedule_fields(in, world_size, earlier.schedules.size());
  Schedule& schedule = fields.schedule;
  if (fields.same != 0) {
    const size_t from = earlier.schedules.size() - fields.same;
    const Schedule& other = earlier.schedules[from];
    if (other.steps.empty())
      in.fail_at(fields.same_at, fmt::format("schedule '{}' takes the steps of schedule {} ('{}'), which "
                                             "has none",
                                             schedule.algorithm, from, other.algorithm));
    if (earlier.base_units[from] != schedule.units)
      in.fail_at(fields.same_at, fmt::format("schedule '{}' takes the steps of schedule {} ('{}'), whose "
                                             "{} units differ from its {}",
                                             schedule.algorithm, from, other.algorithm,
                                             earlier.base_units[from], schedule.units));
    earlier.check_copy(in, fields.same_at, schedule.algorithm, from);
    schedule.steps = other.steps;
    named_from = from;
  } else {
    schedule.steps.resize(in.count(3, "step count"));
    for (Step& step : schedule.steps.edit()) decode_step_v6(in, step, members);
  }
  return finish_schedule(in, std::move(schedule), fields.slices, fields.slices_at, world_size);
}

Plan decode_v6(std::span<const uint8_t> bytes, const std::string& source) {
  ByteReader header(bytes, source);
  header.bytes(kFlagsOffset, "magic and version");
  if (bytes.size() < kHeaderSizeV6) {
    header.fail_at(bytes.size(), fmt::format("truncated: {} bytes, shorter than the {}-byte header",
                                             bytes.size(), kHeaderSizeV6));
  }
  const uint32_t flags = header.fixed32("flags");
  std::string writer_version;
  for (uint8_t byte : header.bytes(kVersionField, "flexplan version")) {
    if (byte == 0) break;
    writer_version.push_back(static_cast<char>(byte));
  }
  const uint64_t topology_hash = header.fixed64("topology hash");
  const uint32_t world_size = header.fixed32("world size");
  const uint64_t payload_length = header.fixed64("payload length");
  const uint64_t stored_checksum = header.fixed64("checksum");

  const size_t available = bytes.size() - kHeaderSizeV6;
  if (payload_length > available) {
    header.fail_at(bytes.size(), fmt::format("truncated: the header announces a {}-byte payload but "
                                             "only {} bytes follow it",
                                             payload_length, available));
  }
  if (payload_length < available) {
    header.fail_at(kHeaderSizeV6 + payload_length,
                   fmt::format("{} trailing bytes after the {}-byte payload", available - payload_length,
                               payload_length));
  }
  const auto payload = bytes.subspan(kHeaderSizeV6);
  const uint64_t checksum = fnv1a64(payload, fnv1a64(bytes.first(kChecksumOffsetV6)));
  if (checksum != stored_checksum) {
    header.fail_at(kChecksumOffsetV6,
                   fmt::format("checksum mismatch (stored {:016x}, content gives {:016x}): the file "
                               "is corrupted (written by flexplan '{}')",
                               stored_checksum, checksum, writer_version));
  }
  if (flags & ~kFlagTopologyHash) header.fail_at(kFlagsOffset, fmt::format("unknown flags {:#x}", flags));
  // Kept canonical: the fingerprint covers this field.
  if (!(flags & kFlagTopologyHash) && topology_hash != 0)
    header.fail_at(kTopologyHashOffset, fmt::format("topology hash {:016x} without the flag that "
                                                    "announces one",
                                                    topology_hash));
  if (world_size < 1 || world_size > kMaxRank)
    header.fail_at(kWorldSizeOffset, fmt::format("world size {} is out of range", world_size));

  Plan plan;
  plan.world_size = static_cast<int32_t>(world_size);
  if (flags & kFlagTopologyHash) plan.topology_hash = fmt::format("{:016x}", topology_hash);

  ByteReader in(payload, source, kHeaderSizeV6);
  plan.topology_name = in.utf8_string("topology name");
  const size_t names_at = in.offset();
  plan.rank_names.resize(in.count(1, "rank name count"));
  if (!plan.rank_names.empty() && plan.rank_names.size() != world_size) {
    in.fail_at(names_at,
               fmt::format("{} rank names for a world size of {}", plan.rank_names.size(), world_size));
  }
  for (size_t rank = 0; rank < plan.rank_names.size(); ++rank)
    plan.rank_names[rank] = in.utf8_string(fmt::format("rank name {}", rank));
  plan.schedules.resize(in.count(6, "schedule count"));
  Earlier earlier;
  GroupMemberBudget members = GroupMemberBudget::for_bytes(payload.size());
  for (size_t i = 0; i < plan.schedules.size(); ++i) {
    earlier.schedules = std::span(plan.schedules).first(i);
    std::optional<size_t> named_from;
    const uint64_t members_left = members.left;
    plan.schedules[i] = decode_schedule_v6(in, plan.world_size, earlier, named_from, members);
    earlier.add(plan.schedules[i], members_left - members.left, named_from);
  }
  if (in.remaining() != 0) in.fail(fmt::format("{} unread bytes at the end of the payload", in.remaining()));
  return plan;
}

// ---- Format 7: the writer.

struct BlockRecord {
  uint64_t ops = 0, length = 0, checksum = 0;
  std::vector<RankInterval> intervals;
};

// Cuts step `step` of the steps schedule `schedule` writes into blocks (plan_sections.hpp,
// kBlockBytes), written to `blocks`, and tallies each rank's part in its ops.
void write_step_blocks(ByteWriter& blocks, const Step& step, size_t schedule, size_t step_index, int32_t world_size,
                       std::vector<BlockRecord>& records, RankTally& tally, std::vector<size_t>& positions,
                       std::vector<int32_t>& ranks) {
  const uint64_t step_key = detail::step_key(schedule, step_index);
  size_t i = 0;
  while (i < step.ops.size()) {
    const size_t start = blocks.size();
    OpContext previous;
    ranks.clear();
    uint64_t first_bytes = 0, count = 0;
    do {
      const size_t before = blocks.size();
      encode_op(blocks, step.ops[i], previous, positions);
      if (count == 0) first_bytes = blocks.size() - before;
      const uint64_t key = op_key(step_key, i);
      for_each_participant(step.ops[i], [&](int32_t rank, uint64_t position) {
        if (rank < 0 || rank >= world_size) return;
        ranks.push_back(rank);
        tally.add(rank, participation_hash(key, position));
      });
      ++count;
      ++i;
    } while (i < step.ops.size() && blocks.size() - start < std::max(kBlockBytes, kBlockRestartRatio * first_bytes));
    BlockRecord record;
    record.ops = count;
    record.length = blocks.size() - start;
    record.checksum = section_checksum(blocks.written().subspan(start));
    record.intervals = rank_progressions(ranks);
    records.push_back(std::move(record));
  }
}

// A format-7 file in three pieces, as encode_v7_parts leaves them: the header and the tables
// (small), then the op blocks and the per-rank chunks (each up to hundreds of MiB at a million
// learners), so that a file can be written without one more copy of the whole.
struct EncodedV7 {
  std::vector<uint8_t> header_and_tables;
  ByteWriter blocks, chunks;

  size_t size() const { return header_and_tables.size() + blocks.size() + chunks.size(); }
  std::vector<uint8_t> joined() && {
    std::vector<uint8_t> bytes = std::move(header_and_tables);
    bytes.reserve(size());
    bytes.insert(bytes.end(), blocks.written().begin(), blocks.written().end());
    bytes.insert(bytes.end(), chunks.written().begin(), chunks.written().end());
    return bytes;
  }
};

EncodedV7 encode_v7_parts(const Plan& plan) {
  ByteWriter header;
  write_header_start(header, plan, kPlanFormatVersion);
  const std::vector<WrittenForm> forms = written_forms(plan);

  EncodedV7 encoded;
  ByteWriter head;
  ByteWriter& blocks = encoded.blocks;
  std::vector<BlockRecord> records;
  std::vector<size_t> positions;
  std::vector<int32_t> ranks;
  uint64_t adds = 0;  // ranks taking part in written ops, for the tally's form
  for (const WrittenForm& form : forms)
    if (form.same == 0)
      for (const Step& step : form.written->steps)
        for (const Op& op : step.ops) adds += op.group.size() + 1;
  RankTally tally(plan.world_size, adds);
  blocks.reserve(adds + adds / 2);  // about what ops take (a byte or so per rank), without regrowing
  head.string(plan.topology_name);
  head.varint(plan.rank_names.empty() ? 0 : 1);
  head.varint(plan.schedules.size());
  for (size_t i = 0; i < plan.schedules.size(); ++i) {
    const WrittenForm& form = forms[i];
    encode_schedule_fields(head, plan.schedules[i], expanded_units(plan.schedules[i]), form.slices, form.same);
    if (form.same != 0) continue;
    head.varint(form.written->steps.size());
    for (size_t s = 0; s < form.written->steps.size(); ++s) {
      const Step& step = form.written->steps[s];
      const size_t first = records.size();
      write_step_blocks(blocks, step, i, s, plan.world_size, records, tally, positions, ranks);
      head.varint(static_cast<uint64_t>(step.phase));
      head.signed_varint(step.level);
      head.varint(step.ops.size());
      head.varint(records.size() - first);
    }
  }

  ByteWriter table;
  table.varint(records.size());
  for (const BlockRecord& record : records) {
    table.varint(record.ops);
    table.varint(record.length);
    table.fixed64(record.checksum);
    table.varint(record.intervals.size());
    int64_t after = 0;
    for (const RankInterval& progression : record.intervals) {
      table.varint(static_cast<uint64_t>(progression.first - after));
      table.varint(progression.count() - 1);
      table.varint(static_cast<uint64_t>(progression.stride));
      after = int64_t{progression.last} + 1;
    }
  }

  // Per-rank entries: every rank when the plan names them, else the ranks that take part in
  // some op; in chunks of kChunkEntries.
  const std::vector<RankTally::Total> totals = std::move(tally).totals();
  const bool names = !plan.rank_names.empty();
  if (names && plan.rank_names.size() != static_cast<size_t>(plan.world_size))
    throw PlanFormatError(fmt::format("plan: {} rank names for a world size of {} cannot be written",
                                      plan.rank_names.size(), plan.world_size));
  const size_t entries = names ? static_cast<size_t>(plan.world_size) : totals.size();
  ByteWriter chunk_table;
  ByteWriter& chunks = encoded.chunks;
  chunk_table.varint((entries + kChunkEntries - 1) / kChunkEntries);
  size_t next_total = 0;
  int64_t after = 0;  // the end of the chunk before
  for (size_t first = 0; first < entries; first += kChunkEntries) {
    const size_t last = std::min(entries, first + kChunkEntries) - 1;
    const auto rank_of = [&](size_t e) { return names ? static_cast<int32_t>(e) : totals[e].rank; };
    const size_t start = chunks.size();
    int64_t previous = -1;
    for (size_t e = first; e <= last; ++e) {
      const int32_t rank = rank_of(e);
      chunks.varint(e == first ? 0 : static_cast<uint64_t>(rank - previous - 1));
      if (names) chunks.string(plan.rank_names[static_cast<size_t>(rank)]);
      while (next_total < totals.size() && totals[next_total].rank < rank) ++next_total;
      const bool has_ops = next_total < totals.size() && totals[next_total].rank == rank;
      chunks.varint(has_ops ? totals[next_total].ops : 0);
      if (has_ops) chunks.fixed64(totals[next_total].digest);
      previous = rank;
    }
    chunk_table.varint(static_cast<uint64_t>(rank_of(first) - after));
    chunk_table.varint(static_cast<uint64_t>(rank_of(last) - rank_of(first) + 1));
    chunk_table.varint(last - first + 1);
    chunk_table.varint(chunks.size() - start);
    chunk_table.fixed64(section_checksum(chunks.written().subspan(start)));
    after = int64_t{rank_of(last)} + 1;
  }

  const std::span<const uint8_t> parts[] = {head.written(), table.written(), chunk_table.written(),
                                            blocks.written(), chunks.written()};
  uint64_t payload = 0;
  for (const auto& part : parts) payload += part.size();
  header.fixed64(payload);
  header.fixed64(0);  // the fingerprint, below
  for (size_t p = 0; p < 4; ++p) header.fixed64(parts[p].size());
  header.fixed64(0);  // the header checksum, below
  std::vector<uint8_t>& bytes = encoded.header_and_tables;
  bytes.reserve(kHeaderSizeV7 + parts[0].size() + parts[1].size() + parts[2].size());
  bytes.insert(bytes.end(), header.written().begin(), header.written().end());
  for (size_t p = 0; p < 3; ++p) bytes.insert(bytes.end(), parts[p].begin(), parts[p].end());
  const std::span<const uint8_t> all(bytes);
  put_u64(bytes, kFingerprintOffset,
          tables_fingerprint(all.first(kHeaderSizeV7), all.subspan(kHeaderSizeV7)));
  put_u64(bytes, kHeaderChecksumOffset, fnv1a64(all.first(kHeaderChecksumOffset)));
  return encoded;
}

std::vector<uint8_t> encode_v7(const Plan& plan) { return encode_v7_parts(plan).joined(); }

// ---- Format 7: the whole decoder.

// What decode_v7 checks of the per-rank index beyond every checksum and the fingerprint:
// Every rank's entry and every block's ranks (decode_plan and the commands), or none, with every
// rank of every op checked to be in the world instead (the runtime, whose each rank checks its
// own entry through read_rank_slice).
enum class IndexCheck { Every, None };

FingerprintedPlan decode_v7(std::span<const uint8_t> bytes, const std::string& source, IndexCheck check) {
  const HeaderV7 header = parse_header_v7(bytes, source, bytes.size());
  const auto header_bytes = bytes.first(kHeaderSizeV7);
  const auto tables = bytes.subspan(kHeaderSizeV7, header.tables_length());
  check_tables_fingerprint(header, header_bytes, tables, source);
  const Head head = parse_head(tables.first(header.head_length), source, kHeaderSizeV7, header);
  const BlockTable table = parse_block_table(tables.subspan(header.head_length, header.block_table_length), source,
                                             kHeaderSizeV7 + header.head_length, head, header);
  const std::vector<ChunkEntry> chunk_table =
      parse_chunk_table(tables.subspan(header.head_length + header.block_table_length), source,
                        kHeaderSizeV7 + header.head_length + header.block_table_length, head, header);

  Plan plan;
  plan.world_size = header.world_size;
  if (header.flags & kFlagTopologyHash) plan.topology_hash = fmt::format("{:016x}", header.topology_hash);
  plan.topology_name = head.topology_name;
  plan.schedules.resize(head.schedules.size());
  // Each rank's part in the written ops, against its entry below (IndexCheck::Every).
  RankTally tally(check == IndexCheck::Every ? plan.world_size : 0, header.blocks_length);
  GroupMemberBudget members = GroupMemberBudget::for_bytes(header.blocks_length);
  Earlier earlier;
  for (size_t i = 0; i < head.schedules.size(); ++i) {
    const HeadSchedule& entry = head.schedules[i];
    Schedule schedule = entry.fields.schedule;
    earlier.schedules = std::span(plan.schedules).first(i);
    const uint64_t members_left = members.left;
    ByteReader fields_reader(bytes, source);
    if (entry.named_from) {
      earlier.check_copy(fields_reader, entry.fields.same_at, schedule.algorithm, *entry.named_from);
      schedule.steps = plan.schedules[*entry.named_from].steps;
    } else {
      std::vector<Step>& steps = schedule.steps.edit();
      steps.resize(entry.steps.size());
      for (size_t s = 0; s < steps.size(); ++s) {
        const StepSummary& summary = entry.steps[s];
        Step& step = steps[s];
        step.phase = summary.phase;
        step.level = summary.level;
        step.ops.resize(summary.ops);
        for (uint64_t b = summary.first_block; b < summary.first_block + summary.blocks; ++b) {
          const BlockEntry& block = table.blocks[b];
          const auto block_bytes = bytes.subspan(block.offset, block.length);
          if (const uint64_t sum = section_checksum(block_bytes); sum != block.checksum)
            ByteReader(block_bytes, source, block.offset)
                .fail_at(block.offset,
                         fmt::format("block {} (schedule {} ({}), step {}, ops {} to {}) fails its checksum "
                                     "(stored {:016x}, content gives {:016x}): the file is corrupted",
                                     b, i, schedule.algorithm, s, block.first_op, block.first_op + block.ops - 1,
                                     block.checksum, sum));
          ByteReader in(block_bytes, source, block.offset);
          const uint64_t step_key = detail::step_key(i, s);
          for (uint64_t k = block.first_op; k < block.first_op + block.ops; ++k) {
            const size_t op_at = in.offset();
            Op& op = step.ops[k];
            decode_op(in, op, k > block.first_op ? &step.ops[k - 1] : nullptr, members);
            const uint64_t key = op_key(step_key, k);
            for_each_participant(op, [&](int32_t rank, uint64_t position) {
              if (check == IndexCheck::Every && rank < plan.world_size) tally.add(rank, participation_hash(key, position));
              if (rank >= plan.world_size) {
                if (check == IndexCheck::None)
                  in.fail_at(op_at, fmt::format("schedule {} ({}): step {} op {}: rank {} is not among the {} ranks",
                                                i, schedule.algorithm, s, k, rank, plan.world_size));
              } else if (check == IndexCheck::Every && !table.holds(block, rank)) {
                in.fail_at(op_at, fmt::format("schedule {} ({}): step {} op {}: rank {} takes part, but block "
                                              "{}'s ranks in the block table leave it out",
                                              i, schedule.algorithm, s, k, rank, b));
              }
            });
          }
          if (in.remaining() != 0)
            in.fail(fmt::format("{} unread bytes at the end of block {}", in.remaining(), b));
        }
      }
    }
    plan.schedules[i] = finish_schedule(fields_reader, std::move(schedule), entry.fields.slices,
                                        entry.fields.slices_at, plan.world_size);
    earlier.add(plan.schedules[i], members_left - members.left, entry.named_from);
  }

  // The per-rank entries: the names, and, with IndexCheck::Every, every rank's count and digest
  // against the ops just decoded.
  const std::vector<RankTally::Total> totals = std::move(tally).totals();
  if (head.rank_names) plan.rank_names.resize(static_cast<size_t>(plan.world_size));
  size_t next_total = 0;
  const auto mismatch = [&](const ByteReader& in, size_t at, int32_t rank, uint64_t ops, uint64_t digest,
                            uint64_t found_ops, uint64_t found_digest) {
    in.fail_at(at, fmt::format("rank {}'s entry records {} ops (digest {:016x}) but the blocks hold {} ops of "
                               "rank {} (digest {:016x}): the per-rank index does not match the ops",
                               rank, ops, digest, found_ops, rank, found_digest));
  };
  for (size_t c = 0; c < chunk_table.size(); ++c) {
    const ChunkEntry& chunk = chunk_table[c];
    const auto chunk_bytes = bytes.subspan(chunk.offset, chunk.length);
    ByteReader at_chunk(chunk_bytes, source, chunk.offset);
    if (const uint64_t sum = section_checksum(chunk_bytes); sum != chunk.checksum)
      at_chunk.fail_at(chunk.offset,
                       fmt::format("chunk {} (the entries of ranks {} to {}) fails its checksum (stored {:016x}, "
                                   "content gives {:016x}): the file is corrupted",
                                   c, chunk.first_rank, chunk.first_rank + static_cast<int64_t>(chunk.span) - 1,
                                   chunk.checksum, sum));
    ChunkReader reader(chunk_bytes, source, chunk, head.rank_names);
    RankEntry entry;
    while (reader.next(entry)) {
      if (head.rank_names) plan.rank_names[static_cast<size_t>(entry.rank)] = std::move(entry.name);
      if (check != IndexCheck::Every) continue;
      // Ranks with ops but no entry (before this one), then this one.
      if (next_total < totals.size() && totals[next_total].rank < entry.rank)
        mismatch(at_chunk, chunk.offset, totals[next_total].rank, 0, 0, totals[next_total].ops,
                 totals[next_total].digest);
      const bool has = next_total < totals.size() && totals[next_total].rank == entry.rank;
      const uint64_t found_ops = has ? totals[next_total].ops : 0, found_digest = has ? totals[next_total].digest : 0;
      if (found_ops != entry.ops || found_digest != entry.digest)
        mismatch(at_chunk, chunk.offset, entry.rank, entry.ops, entry.digest, found_ops, found_digest);
      if (has) ++next_total;
    }
  }
  if (check == IndexCheck::Every && next_total < totals.size())
    mismatch(ByteReader(bytes, source), header.chunks_offset(), totals[next_total].rank, 0, 0, totals[next_total].ops,
             totals[next_total].digest);
  return {std::move(plan), header.fingerprint};
}

FingerprintedPlan decode_any(std::span<const uint8_t> bytes, const std::string& source, IndexCheck check) {
  const uint32_t format = read_format_version(bytes, source);
  if (format == kPlanFormatVersion) return decode_v7(bytes, source, check);
  if (format == kOldestPlanFormat) {
    // Fingerprinted as format 7 would write it, so that every copy of a plan agrees.
    Plan plan = decode_v6(bytes, source);
    const uint64_t fingerprint = plan_fingerprint(plan);
    return {std::move(plan), fingerprint};
  }
  unsupported_version(ByteReader(bytes, source), format);
}

}  // namespace

bool has_plan_magic(std::span<const uint8_t> bytes) {
  if (bytes.empty()) return false;
  const size_t compared = std::min(bytes.size(), sizeof kPlanMagic);
  return std::memcmp(bytes.data(), kPlanMagic, compared) == 0;
}

std::vector<uint8_t> encode_plan(const Plan& plan) { return encode_v7(plan); }

std::vector<uint8_t> encode_plan_version6(const Plan& plan) {
  ByteWriter out;
  write_header_start(out, plan, kOldestPlanFormat);
  out.fixed64(0);  // payload length
  out.fixed64(0);  // checksum
  encode_payload_v6(out, plan);
  std::vector<uint8_t>& bytes = out.buffer();
  put_u64(bytes, kPayloadLengthOffset, bytes.size() - kHeaderSizeV6);
  const std::span<const uint8_t> all(bytes);
  put_u64(bytes, kChecksumOffsetV6, fnv1a64(all.subspan(kHeaderSizeV6), fnv1a64(all.first(kChecksumOffsetV6))));
  return std::move(bytes);
}

uint64_t plan_fingerprint(const Plan& plan) {
  const std::vector<uint8_t> bytes = encode_v7(plan);
  uint64_t fingerprint = 0;
  for (int i = 0; i < 8; ++i) fingerprint |= static_cast<uint64_t>(bytes[kFingerprintOffset + i]) << (8 * i);
  return fingerprint;
}

uint32_t plan_format_version(std::span<const uint8_t> bytes, const std::string& source) {
  return read_format_version(bytes, source);
}

Plan decode_plan_unverified(std::span<const uint8_t> bytes, const std::string& source) {
  return decode_fingerprinted_plan(bytes, source).plan;
}

FingerprintedPlan decode_fingerprinted_plan(std::span<const uint8_t> bytes, const std::string& source) {
  return decode_any(bytes, source, IndexCheck::Every);
}

FingerprintedPlan decode_job_plan(std::span<const uint8_t> bytes, const std::string& source) {
  return decode_any(bytes, source, IndexCheck::None);
}

std::vector<uint8_t> encode_verified_plan(const Plan& plan) {
  verify_plan(plan);
  std::vector<uint8_t> bytes = encode_plan(plan);
  detail::mark_verified(bytes);
  return bytes;
}

bool verified_when_written(std::span<const uint8_t> bytes, const std::string& source) {
  if (read_format_version(bytes, source) != kPlanFormatVersion) return false;
  return (parse_header_v7(bytes, source, bytes.size()).flags & kFlagVerified) != 0;
}

Plan decode_plan(std::span<const uint8_t> bytes, const std::string& source) {
  Plan plan = decode_plan_unverified(bytes, source);
  verify_plan(plan);
  return plan;
}

void write_plan_file(const std::string& path, const Plan& plan, const VerifiedSchedules* already) {
  // Encoded on a thread of its own while the plan is verified (both only read it; all five
  // collectives at 10k learners: tenths of a second each); nothing is written unless it verifies.
  // Written in its pieces, not joined: at a million learners the whole is hundreds of MiB more.
  std::future<EncodedV7> encoded = std::async(
      std::thread::hardware_concurrency() >= 2 ? std::launch::async : std::launch::deferred,
      [&plan] { return encode_v7_parts(plan); });
  verify_plan(plan, already);
  EncodedV7 pieces = encoded.get();
  detail::mark_verified(pieces.header_and_tables);  // what lets each rank of a job check its own part alone
  // Write beside the target and rename, so a reader never sees half a plan.
  const std::string temporary = path + ".tmp";
  {
    std::ofstream file(temporary, std::ios::binary | std::ios::trunc);
    if (!file)
      throw PlanFormatError(fmt::format("{}: cannot write: {}", temporary, std::strerror(errno)));
    for (const std::span<const uint8_t> piece :
         {std::span<const uint8_t>(pieces.header_and_tables), pieces.blocks.written(), pieces.chunks.written()})
      file.write(reinterpret_cast<const char*>(piece.data()), static_cast<std::streamsize>(piece.size()));
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

Plan read_plan_file(const std::string& path) { return decode_plan(read_plan_bytes(path), path); }

std::vector<uint8_t> read_plan_bytes(const std::string& path) {
  detail::FileReader file(path);
  return read_plan_bytes(file);
}

std::vector<uint8_t> read_plan_bytes(detail::FileReader& file) {
  // The larger header's worth: a short file, a bad magic or another version fails on it alone
  // just as the whole file would (those checks come first), and nothing more is read.
  const std::span<const uint8_t> head = file.read_to(kHeaderSizeV7);
  const uint32_t format = read_format_version(head, file.path());
  uint64_t header_size = 0, payload_length = 0;
  if (format == kPlanFormatVersion) {
    header_size = kHeaderSizeV7;
    // Every header check, the payload length against a regular file's size included.
    payload_length = parse_header_v7(head, file.path(), file.size()).payload_length;
  } else if (format == kOldestPlanFormat) {
    header_size = kHeaderSizeV6;
    if (head.size() < kHeaderSizeV6) {
      decode_v6(head, file.path());
      return file.take();  // not reached: decoding a header alone always fails
    }
    ByteReader header(head.subspan(kPayloadLengthOffset), file.path(), kPayloadLengthOffset);
    payload_length = header.fixed64("payload length");
    if (const auto size = file.size(); size && *size >= kHeaderSizeV6) {
      const uint64_t available = *size - kHeaderSizeV6;
      if (payload_length > available)
        header.fail_at(*size, fmt::format("truncated: the header announces a {}-byte payload but "
                                          "only {} bytes follow it",
                                          payload_length, available));
      if (payload_length < available)
        header.fail_at(kHeaderSizeV6 + payload_length,
                       fmt::format("{} trailing bytes after the {}-byte payload", available - payload_length,
                                   payload_length));
    }
  } else {
    unsupported_version(ByteReader(head, file.path()), format);
  }
  // At most one byte past the announced payload: enough for the decoder to report trailing
  // bytes, and a pipe is never read on unbounded.
  const uint64_t announced = std::min<uint64_t>(payload_length, UINT64_MAX - header_size - 1);
  file.read_to(header_size + announced + 1);
  return file.take();
}

}  // namespace flexplan::ir
