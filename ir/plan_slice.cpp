// load_rank_slice and read_rank_slice: one rank's part of a plan.bin (plan_slice.hpp).
#include "ir/plan_slice.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "flexplan/version.hpp"
#include "ir/errors.hpp"
#include "ir/pipeline_form.hpp"
#include "ir/plan_binary.hpp"
#include "ir/plan_sections.hpp"
#include "ir/verify.hpp"

namespace flexplan::ir {
namespace {

using namespace detail;

// Where the bytes come from: a file read at offsets, or memory.
class Source {
 public:
  virtual ~Source() = default;
  virtual uint64_t size() const = 0;
  // Bytes [offset, offset + length), which the caller has checked lie in the file. Valid until
  // the next read.
  virtual std::span<const uint8_t> read(uint64_t offset, uint64_t length) = 0;
  uint64_t bytes_read = 0;
};

class MemorySource : public Source {
 public:
  explicit MemorySource(std::span<const uint8_t> bytes) : bytes_(bytes) {}
  uint64_t size() const override { return bytes_.size(); }
  std::span<const uint8_t> read(uint64_t offset, uint64_t length) override {
    bytes_read += length;
    return bytes_.subspan(offset, length);
  }

 private:
  std::span<const uint8_t> bytes_;
};

class FileSource : public Source {
 public:
  explicit FileSource(const std::string& path) : path_(path) {
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) throw PlanFormatError(path + ": cannot open: " + std::strerror(errno));
    struct stat st {};
    if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(fd_);
      throw PlanFormatError(path + ": not a regular file: a rank reads its part of a plan at offsets "
                                   "(load the plan whole from a pipe or a device)");
    }
    size_ = static_cast<uint64_t>(st.st_size);
  }
  ~FileSource() override { ::close(fd_); }
  FileSource(const FileSource&) = delete;
  FileSource& operator=(const FileSource&) = delete;

  uint64_t size() const override { return size_; }
  std::span<const uint8_t> read(uint64_t offset, uint64_t length) override {
    buffer_.resize(length);
    uint64_t done = 0;
    while (done < length) {
      const ssize_t got = ::pread(fd_, buffer_.data() + done, length - done, static_cast<off_t>(offset + done));
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) throw PlanFormatError(path_ + ": read failed: " + std::strerror(errno));
      if (got == 0)
        throw PlanFormatError(fmt::format("{}: byte {}: the file ended while read (did it change?)", path_,
                                          offset + done));
      done += static_cast<uint64_t>(got);
    }
    bytes_read += length;
    return buffer_;
  }

 private:
  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;
  std::vector<uint8_t> buffer_;
};

// Blocks whose bytes lie closer than this are read in one go.
constexpr uint64_t kReadTogether = 64 * 1024;

RankSlice read_slice(Source& source_bytes, const std::string& source, int32_t rank) {
  RankSlice slice;
  slice.rank = rank;
  slice.cost.file_bytes = source_bytes.size();
  // The header: the version first, then the rest (bounded: 100 bytes).
  const auto first = source_bytes.read(0, std::min<uint64_t>(source_bytes.size(), kHeaderSizeV7));
  const std::vector<uint8_t> header_bytes(first.begin(), first.end());
  const uint32_t format = read_format_version(header_bytes, source);
  if (format == kOldestPlanFormat)
    ByteReader(header_bytes, source)
        .fail_at(kVersionOffset,
                 fmt::format("plan.bin format version {} holds no per-rank index, so a rank cannot read its "
                             "part alone: load it whole (read_plan_file; the runtime does), or plan again to "
                             "write version {}",
                             format, kPlanFormatVersion));
  if (format != kPlanFormatVersion) unsupported_version(ByteReader(header_bytes, source), format);
  const HeaderV7 header = parse_header_v7(header_bytes, source, source_bytes.size());
  if (rank < 0 || rank >= header.world_size)
    throw std::invalid_argument(fmt::format("{}: rank {} is not among the plan's {} ranks", source, rank,
                                            header.world_size));
  slice.world_size = header.world_size;
  if (header.flags & kFlagTopologyHash) slice.topology_hash = fmt::format("{:016x}", header.topology_hash);
  slice.fingerprint = header.fingerprint;
  slice.verified_when_written = (header.flags & kFlagVerified) != 0;

  // The head and tables, whole, against the fingerprint.
  const auto tables_read = source_bytes.read(kHeaderSizeV7, header.tables_length());
  const std::vector<uint8_t> tables(tables_read.begin(), tables_read.end());
  const std::span<const uint8_t> all_tables(tables);
  check_tables_fingerprint(header, header_bytes, all_tables, source);
  const Head head = parse_head(all_tables.first(header.head_length), source, kHeaderSizeV7, header);
  const BlockTable table = parse_block_table(all_tables.subspan(header.head_length, header.block_table_length),
                                             source, kHeaderSizeV7 + header.head_length, head, header);
  const std::vector<ChunkEntry> chunks =
      parse_chunk_table(all_tables.subspan(header.head_length + header.block_table_length), source,
                        kHeaderSizeV7 + header.head_length + header.block_table_length, head, header);
  slice.topology_name = head.topology_name;
  slice.cost.blocks = table.blocks.size();

  // The fields: each schedule's, and the plan's (byte ranges, every size served).
  Plan fields;
  fields.world_size = header.world_size;
  fields.topology_name = head.topology_name;
  fields.topology_hash = slice.topology_hash;
  slice.schedules.resize(head.schedules.size());
  for (size_t i = 0; i < head.schedules.size(); ++i) {
    const HeadSchedule& entry = head.schedules[i];
    SliceSchedule& schedule = slice.schedules[i];
    schedule.fields = entry.fields.schedule;
    const uint64_t slices = entry.fields.slices;
    const bool has_steps = entry.named_from ? true : !entry.steps.empty();
    if (slices > 1 && !has_steps) {
      schedule.fields.units *= slices;  // a base without steps is its whole expansion already
    } else {
      schedule.fields.slices = static_cast<uint32_t>(slices);
    }
    schedule.steps_of = entry.named_from;
    for (const StepSummary& step : entry.steps) schedule.steps.push_back({step.phase, step.level, step.ops, {}});
    fields.schedules.push_back(schedule.fields);
    check_schedule_fields_only(schedule.fields, header.world_size, schedule_label(fields, i));
  }
  check_plan_fields(fields);

  // The blocks that hold this rank, read together where they lie close.
  std::vector<size_t> mine;
  for (size_t b = 0; b < table.blocks.size(); ++b)
    if (table.holds(table.blocks[b], rank)) mine.push_back(b);
  // The whole decoder's budget for group members (plan_sections.hpp), of which this rank's
  // blocks spend a part: a file the whole decoder reads, every rank reads.
  GroupMemberBudget members = GroupMemberBudget::for_bytes(header.blocks_length);
  uint64_t found_ops = 0, found_digest = 0;
  std::vector<Op> ops;
  for (size_t at = 0; at < mine.size();) {
    size_t end = at + 1;
    while (end < mine.size() && table.blocks[mine[end]].offset <=
                                    table.blocks[mine[end - 1]].offset + table.blocks[mine[end - 1]].length + kReadTogether)
      ++end;
    const uint64_t from = table.blocks[mine[at]].offset;
    const uint64_t to = table.blocks[mine[end - 1]].offset + table.blocks[mine[end - 1]].length;
    const std::span<const uint8_t> read = source_bytes.read(from, to - from);
    for (; at < end; ++at) {
      const size_t b = mine[at];
      const BlockEntry& block = table.blocks[b];
      const HeadSchedule& entry = head.schedules[block.schedule];
      const std::string label = schedule_label(fields, block.schedule);
      const auto block_bytes = read.subspan(block.offset - from, block.length);
      if (const uint64_t sum = section_checksum(block_bytes); sum != block.checksum)
        ByteReader(block_bytes, source, block.offset)
            .fail_at(block.offset,
                     fmt::format("block {} ({}, step {}, ops {} to {}) fails its checksum (stored {:016x}, "
                                 "content gives {:016x}): the file is corrupted (read by rank {})",
                                 b, label, block.step, block.first_op, block.first_op + block.ops - 1,
                                 block.checksum, sum, rank));
      ByteReader in(block_bytes, source, block.offset);
      ops.resize(block.ops);
      SliceStep& step = slice.schedules[block.schedule].steps[block.step];
      for (uint64_t k = 0; k < block.ops; ++k) {
        const size_t op_at = in.offset();
        Op& op = ops[k];
        decode_op(in, op, k > 0 ? &ops[k - 1] : nullptr, members);
        const uint64_t index = block.first_op + k;
        check_op_structure(op, entry.fields.schedule.units, header.world_size, label, block.step, index);
        int64_t my_position = -1;
        for_each_participant(op, [&](int32_t r, uint64_t position) {
          if (!table.holds(block, r))
            in.fail_at(op_at, fmt::format("{}: step {} op {}: rank {} takes part, but block {}'s ranks in the "
                                          "block table leave it out (read by rank {})",
                                          label, block.step, index, r, b, rank));
          if (r == rank) my_position = static_cast<int64_t>(position);
        });
        if (my_position >= 0) {
          ++found_ops;
          found_digest += participation_hash(op_key(step_key(block.schedule, block.step), index), static_cast<uint64_t>(my_position));
          step.ops.push_back({index, op});
        }
      }
      if (in.remaining() != 0) in.fail(fmt::format("{} unread bytes at the end of block {}", in.remaining(), b));
      ++slice.cost.blocks_read;
      slice.cost.ops_decoded += block.ops;
    }
  }
  slice.ops = found_ops;

  // This rank's entry: its name, and what it records of the rank's ops.
  RankEntry entry;
  bool has_entry = false;
  size_t entry_at = header.chunks_offset();
  if (const ChunkEntry* chunk = chunk_of(chunks, rank)) {
    const auto chunk_bytes = source_bytes.read(chunk->offset, chunk->length);
    entry_at = chunk->offset;
    if (const uint64_t sum = section_checksum(chunk_bytes); sum != chunk->checksum)
      ByteReader(chunk_bytes, source, chunk->offset)
          .fail_at(chunk->offset,
                   fmt::format("chunk {} (the entries of ranks {} to {}) fails its checksum (stored {:016x}, "
                               "content gives {:016x}): the file is corrupted (read by rank {})",
                               chunk - chunks.data(), chunk->first_rank,
                               chunk->first_rank + static_cast<int64_t>(chunk->span) - 1, chunk->checksum, sum, rank));
    ChunkReader reader(chunk_bytes, source, *chunk, head.rank_names);
    while (reader.next(entry)) {
      if (entry.rank == rank) {
        has_entry = true;
        break;
      }
      if (entry.rank > rank) break;
    }
  }
  if (!has_entry) entry = RankEntry{rank, {}, 0, 0};
  if (head.rank_names) slice.rank_name = entry.name;
  if (entry.ops != found_ops || entry.digest != found_digest)
    ByteReader(header_bytes, source)
        .fail_at(entry_at, fmt::format("rank {}'s entry records {} ops (digest {:016x}) but the blocks whose "
                                       "ranks include it hold {} of its ops (digest {:016x}): the per-rank index "
                                       "does not match the ops",
                                       rank, entry.ops, entry.digest, found_ops, found_digest));

  // The pipeline limits, for the whole expansion (from the head's op counts) and for this rank.
  for (size_t i = 0; i < head.schedules.size(); ++i) {
    const SliceSchedule& schedule = slice.schedules[i];
    const uint64_t slices = schedule.fields.slices;
    if (slices == 1) continue;
    const size_t written = schedule.steps_of.value_or(i);
    uint64_t my_ops = 0;
    for (const SliceStep& step : slice.schedules[written].steps) my_ops += step.ops.size();
    PipelineFootprint footprint;
    footprint.ops = head.schedules[i].ops;
    footprint.largest_rank_ops = my_ops;
    const std::string beyond = pipeline_beyond_limits(footprint, slices);
    if (!beyond.empty())
      ByteReader(header_bytes, source)
          .fail_at(head.schedules[i].fields.slices_at,
                   fmt::format("schedule '{}': a pipeline of {} slices larger than plan.bin allows: {} (read by "
                               "rank {})",
                               schedule.fields.algorithm, slices, beyond, rank));
    // Its base's ranges stay within the base's units: checked with each op's structure above.
  }
  slice.cost.bytes_read = source_bytes.bytes_read;
  return slice;
}

}  // namespace

RankSlice load_rank_slice(const std::string& path, int32_t rank) {
  FileSource file(path);
  return read_slice(file, path, rank);
}

RankSlice read_rank_slice(std::span<const uint8_t> bytes, const std::string& source, int32_t rank) {
  MemorySource memory(bytes);
  return read_slice(memory, source, rank);
}

}  // namespace flexplan::ir
