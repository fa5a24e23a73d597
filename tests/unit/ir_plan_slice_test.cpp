// plan.bin format 7 and one rank's part of it (ir/plan_slice.hpp): each rank reads exactly the
// ops it takes part in, reading little of a large file; a corrupted block, chunk, table or header
// is named (with the rank that read it); truncated files, format 6 files and an index that does
// not match the ops are refused with clear errors.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <climits>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "ir/byte_io.hpp"
#include "ir/job_plan.hpp"
#include "ir/pipeline_form.hpp"
#include "ir/plan_binary.hpp"
#include "ir/plan_sections.hpp"
#include "ir/plan_slice.hpp"
#include "ir/verify.hpp"
#include "tests/unit/ir_test_plans.hpp"

namespace flexplan::ir {
namespace {

constexpr size_t kHeaderSize = 100, kBlockTableLengthAt = 68;

// What `read` throws (a PlanFormatError's or VerifyError's message), or "accepted".
std::string error_of(const std::function<void()>& read) {
  try {
    read();
  } catch (const PlanFormatError& e) {
    return std::string("format: ") + e.what();
  } catch (const VerifyError& e) {
    return std::string("verify: ") + e.what();
  }
  return "accepted";
}

std::string slice_error(const std::vector<uint8_t>& bytes, int32_t rank) {
  return error_of([&] { (void)read_rank_slice(bytes, "plan.bin", rank); });
}
std::string whole_error(const std::vector<uint8_t>& bytes) {
  return error_of([&] { (void)decode_plan_unverified(bytes, "plan.bin"); });
}

bool takes_part(const Op& op, int32_t rank) {
  bool found = false;
  detail::for_each_participant(op, [&](int32_t r, uint64_t) { found |= r == rank; });
  return found;
}

// The slice `rank` should get of `plan` (as decode_plan reads it back): every field, and of the
// steps each schedule writes only the rank's ops.
void expect_slice_of(const Plan& plan, const RankSlice& slice, int32_t rank) {
  SCOPED_TRACE(fmt::format("rank {}", rank));
  EXPECT_EQ(slice.rank, rank);
  EXPECT_EQ(slice.world_size, plan.world_size);
  EXPECT_EQ(slice.topology_name, plan.topology_name);
  EXPECT_EQ(slice.topology_hash, plan.topology_hash);
  EXPECT_EQ(slice.fingerprint, plan_fingerprint(plan));
  if (plan.rank_names.empty())
    EXPECT_FALSE(slice.rank_name.has_value());
  else
    EXPECT_EQ(slice.rank_name, plan.rank_names[static_cast<size_t>(rank)]);
  ASSERT_EQ(slice.schedules.size(), plan.schedules.size());
  uint64_t ops = 0;
  for (size_t i = 0; i < plan.schedules.size(); ++i) {
    const Schedule& whole = plan.schedules[i];
    const SliceSchedule& part = slice.schedules[i];
    Schedule fields = whole;
    fields.steps = {};
    EXPECT_EQ(part.fields, fields) << "schedule " << i;
    if (part.steps_of) {
      EXPECT_LT(*part.steps_of, i);
      EXPECT_TRUE(part.steps.empty());
      EXPECT_EQ(plan.schedules[*part.steps_of].steps, whole.steps);
      continue;
    }
    ASSERT_EQ(part.steps.size(), whole.steps.size()) << "schedule " << i;
    for (size_t s = 0; s < whole.steps.size(); ++s) {
      const Step& step = whole.steps[s];
      EXPECT_EQ(part.steps[s].phase, step.phase);
      EXPECT_EQ(part.steps[s].level, step.level);
      EXPECT_EQ(part.steps[s].op_count, step.ops.size());
      std::vector<SliceOp> expected;
      for (size_t k = 0; k < step.ops.size(); ++k)
        if (takes_part(step.ops[k], rank)) expected.push_back({k, step.ops[k]});
      EXPECT_EQ(part.steps[s].ops, expected) << "schedule " << i << " step " << s;
      ops += expected.size();
    }
  }
  EXPECT_EQ(slice.ops, ops);
}

// A plan with what plan.bin codes specially: a compact pipeline, a pipeline whose steps another
// names, star ops, and all five collectives.
Plan varied_plan(int32_t p) {
  Schedule ring = testing::ring_schedule(p);
  ring.max_bytes = 1024;
  Schedule hier = testing::hierarchical_schedule(p, 4);
  hier.min_bytes = 1024;
  hier.max_bytes = 4096;
  Schedule piped = compact_pipeline(testing::hierarchical_schedule(p, 4), 4);
  piped.min_bytes = 4096;
  piped.max_bytes = 1 << 20;
  Schedule named = compact_pipeline(testing::hierarchical_schedule(p, 4), 8);
  named.min_bytes = 1 << 20;
  for (Step& step : hier.steps.edit())
    for (size_t o = 0; o < step.ops.size(); o += 2) step.ops[o].shape = OpShape::Star;
  return testing::plan_of({ring, hier, piped, named}, p);
}

TEST(PlanSlice, EachRankGetsExactlyItsOps) {
  Plan unnamed = varied_plan(12);
  unnamed.rank_names.clear();
  unnamed.topology_hash.clear();
  for (const Plan& plan : {testing::two_range_plan(6), varied_plan(12), unnamed}) {
    const std::vector<uint8_t> bytes = encode_plan(plan);
    const Plan decoded = decode_plan(bytes, "plan.bin");
    EXPECT_EQ(materialize(decoded), materialize(plan));
    ASSERT_EQ(decoded.schedules.size(), plan.schedules.size());
    for (int32_t rank = 0; rank < plan.world_size; ++rank)
      expect_slice_of(decoded, read_rank_slice(bytes, "plan.bin", rank), rank);
  }
}

TEST(PlanSlice, FromAFileAsFromMemory) {
  const Plan plan = varied_plan(12);
  const std::string path =
      (std::filesystem::temp_directory_path() / fmt::format("flexplan-slice-{}.bin", ::getpid())).string();
  write_plan_file(path, plan);
  const std::vector<uint8_t> bytes = encode_plan(plan);
  for (int32_t rank : {0, 5, 11}) {
    const RankSlice from_file = load_rank_slice(path, rank);
    const RankSlice from_memory = read_rank_slice(bytes, "mem", rank);
    EXPECT_EQ(from_file.schedules, from_memory.schedules);
    EXPECT_EQ(from_file.fingerprint, from_memory.fingerprint);
    EXPECT_EQ(from_file.cost.bytes_read, from_memory.cost.bytes_read);
  }
  // The runtime's load: its part, then the whole plan.
  const FingerprintedPlan job = load_job_plan(path, 12, 3);
  EXPECT_EQ(job.plan, decode_plan(bytes, "mem"));
  EXPECT_EQ(job.fingerprint, plan_fingerprint(plan));
  std::filesystem::remove(path);
}

// A rank reads a small part of a large plan: hierarchical over 4,096 ranks in groups of 8, and a
// binary tree.
TEST(PlanSlice, ARankReadsLittleOfALargePlan) {
  Schedule hier = testing::hierarchical_schedule(4096, 8);
  hier.max_bytes = 4096;
  Schedule tree = testing::tree_schedule(4096);
  tree.min_bytes = 4096;
  const Plan plan = testing::plan_of({hier, tree}, 4096);
  const std::vector<uint8_t> bytes = encode_plan(plan);
  for (int32_t rank : {7, 2049, 4095}) {
    const RankSlice slice = read_rank_slice(bytes, "plan.bin", rank);
    SCOPED_TRACE(fmt::format("rank {}: {} of {} bytes, {} of {} blocks", rank, slice.cost.bytes_read,
                             bytes.size(), slice.cost.blocks_read, slice.cost.blocks));
    EXPECT_LT(slice.cost.bytes_read * 8, bytes.size());
    EXPECT_LT(slice.cost.blocks_read * 8, slice.cost.blocks);
  }
  // A leader takes part in every step of the leaders' ring: it reads a block or two of each
  // step it has ops in, not more.
  for (int32_t rank : {0, 2048}) {
    const RankSlice slice = read_rank_slice(bytes, "plan.bin", rank);
    uint64_t steps = 0;
    for (const SliceSchedule& schedule : slice.schedules)
      for (const SliceStep& step : schedule.steps) steps += step.ops.empty() ? 0 : 1;
    EXPECT_LE(slice.cost.blocks_read, 2 * steps) << "rank " << rank;
    expect_slice_of(plan, slice, rank);
  }
}

// Where a byte of a block, a chunk, the tables or the header is flipped, the error names what
// failed; a block or chunk is named with the rank that read it.
TEST(PlanSlice, CorruptionIsNamed) {
  const Plan plan = varied_plan(12);
  const std::vector<uint8_t> good = encode_plan(plan);
  const detail::HeaderV7 header = detail::parse_header_v7(good, "plan.bin", good.size());
  const auto tables = std::span(good).subspan(kHeaderSize, header.tables_length());
  const detail::Head head = detail::parse_head(tables.first(header.head_length), "plan.bin", kHeaderSize, header);
  const detail::BlockTable table =
      detail::parse_block_table(tables.subspan(header.head_length, header.block_table_length), "plan.bin",
                                kHeaderSize + header.head_length, head, header);
  // A block rank 5 reads, and one it does not.
  size_t read = SIZE_MAX, unread = SIZE_MAX;
  for (size_t b = 0; b < table.blocks.size(); ++b) {
    if (table.holds(table.blocks[b], 5) && read == SIZE_MAX) read = b;
    if (!table.holds(table.blocks[b], 5) && unread == SIZE_MAX) unread = b;
  }
  ASSERT_NE(read, SIZE_MAX);
  ASSERT_NE(unread, SIZE_MAX);
  auto flipped = [&](uint64_t at) {
    auto bytes = good;
    bytes[at] ^= 0x10;
    return bytes;
  };
  const auto bad_read = flipped(table.blocks[read].offset + table.blocks[read].length / 2);
  const std::string message = slice_error(bad_read, 5);
  EXPECT_NE(message.find(fmt::format("block {} (", read)), std::string::npos) << message;
  EXPECT_NE(message.find("fails its checksum"), std::string::npos) << message;
  EXPECT_NE(message.find("read by rank 5"), std::string::npos) << message;
  EXPECT_NE(whole_error(bad_read).find(fmt::format("block {} (", read)), std::string::npos) << whole_error(bad_read);
  // A rank that does not read the block does not see it; the whole decoder and the job's load do.
  const auto bad_unread = flipped(table.blocks[unread].offset);
  EXPECT_EQ(slice_error(bad_unread, 5), "accepted");
  EXPECT_NE(whole_error(bad_unread).find("fails its checksum"), std::string::npos);
  EXPECT_NE(error_of([&] { (void)decode_job_plan(bad_unread, "plan.bin"); }).find("fails its checksum"),
            std::string::npos);

  // The chunk holding rank 5's entry.
  const auto bad_chunk = flipped(header.chunks_offset() + 3);
  EXPECT_NE(slice_error(bad_chunk, 5).find("chunk 0 (the entries of ranks 0 to 11) fails its checksum"),
            std::string::npos)
      << slice_error(bad_chunk, 5);
  // The head and tables: the fingerprint the header stores no longer holds.
  for (uint64_t at : {kHeaderSize + 2, kHeaderSize + header.head_length + 1,
                      kHeaderSize + header.head_length + header.block_table_length + 1}) {
    const auto bytes = flipped(at);
    EXPECT_NE(slice_error(bytes, 5).find("not the"), std::string::npos) << at << ": " << slice_error(bytes, 5);
    EXPECT_NE(slice_error(bytes, 5).find("the file is corrupted"), std::string::npos);
    EXPECT_NE(whole_error(bytes).find("fingerprint"), std::string::npos) << whole_error(bytes);
  }
  // Any header field: its checksum.
  for (uint64_t at = 12; at < kHeaderSize; ++at)
    EXPECT_NE(slice_error(flipped(at), 0).find("header checksum mismatch"), std::string::npos)
        << at << ": " << slice_error(flipped(at), 0);
  // Every byte, by every reader that reads it.
  for (uint64_t at = 0; at < good.size(); ++at) {
    const auto bytes = flipped(at);
    EXPECT_NE(whole_error(bytes), "accepted") << "byte " << at;
  }
}

TEST(PlanSlice, TruncatedFilesAreRefused) {
  const std::vector<uint8_t> good = encode_plan(varied_plan(12));
  for (size_t size = 0; size < good.size(); size += (size < 200 ? 1 : 37)) {
    const std::vector<uint8_t> cut(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(size));
    const std::string message = slice_error(cut, 0);
    EXPECT_TRUE(message.find("truncated") != std::string::npos || message.find("the file is empty") != std::string::npos)
        << size << ": " << message;
  }
  // From disk: the header's length against the file's size, before anything else is read.
  const std::string path =
      (std::filesystem::temp_directory_path() / fmt::format("flexplan-slice-cut-{}.bin", ::getpid())).string();
  {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(good.data()), static_cast<std::streamsize>(good.size() - 10));
  }
  const std::string message = error_of([&] { (void)load_rank_slice(path, 3); });
  EXPECT_NE(message.find("truncated: the header announces a"), std::string::npos) << message;
  std::filesystem::remove(path);
  EXPECT_NE(error_of([&] { (void)load_rank_slice(path, 3); }).find("cannot open"), std::string::npos);
}

// Format 6 files have no per-rank index: the slice reader says to load them whole, which every
// whole reader and the runtime's load still do; older versions are refused.
TEST(PlanSlice, OlderFormats) {
  const Plan plan = varied_plan(12);
  std::vector<uint8_t> old = encode_plan_version6(plan);
  EXPECT_EQ(plan_format_version(old, "old.bin"), 6u);
  const std::string message = slice_error(old, 0);
  EXPECT_NE(message.find("byte 8: plan.bin format version 6 holds no per-rank index"), std::string::npos) << message;
  EXPECT_NE(message.find("load it whole"), std::string::npos) << message;
  const FingerprintedPlan decoded = decode_fingerprinted_plan(old, "old.bin");
  EXPECT_EQ(materialize(decoded.plan), materialize(plan));
  EXPECT_EQ(decoded.fingerprint, plan_fingerprint(plan)) << "the same plan, the same fingerprint";
  const std::string path =
      (std::filesystem::temp_directory_path() / fmt::format("flexplan-slice-v6-{}.bin", ::getpid())).string();
  {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(old.data()), static_cast<std::streamsize>(old.size()));
  }
  EXPECT_EQ(load_job_plan(path, 12, 4).fingerprint, plan_fingerprint(plan));
  std::filesystem::remove(path);
  old[8] = 5;
  detail::reseal_plan(old);
  EXPECT_NE(whole_error(old).find("plan.bin format version 5 is not supported"), std::string::npos);
  EXPECT_NE(slice_error(old, 0).find("plan.bin format version 5 is not supported"), std::string::npos);
}

// The per-rank index rewritten: a rank's entry, or a block's ranks. Both readers refuse it.
std::vector<uint8_t> with_block_table(const std::vector<uint8_t>& good,
                                      const std::function<void(detail::BlockTable&)>& change) {
  const detail::HeaderV7 header = detail::parse_header_v7(good, "plan.bin", good.size());
  const auto tables = std::span(good).subspan(kHeaderSize, header.tables_length());
  const detail::Head head = detail::parse_head(tables.first(header.head_length), "plan.bin", kHeaderSize, header);
  detail::BlockTable table = detail::parse_block_table(tables.subspan(header.head_length, header.block_table_length),
                                                       "plan.bin", kHeaderSize + header.head_length, head, header);
  change(table);
  detail::ByteWriter out;
  out.varint(table.blocks.size());
  for (const detail::BlockEntry& block : table.blocks) {
    out.varint(block.ops);
    out.varint(block.length);
    out.fixed64(block.checksum);
    out.varint(block.intervals_end - block.intervals_begin);
    int64_t after = 0;
    for (uint32_t i = block.intervals_begin; i < block.intervals_end; ++i) {
      out.varint(static_cast<uint64_t>(table.intervals[i].first - after));
      out.varint(table.intervals[i].count() - 1);
      out.varint(static_cast<uint64_t>(table.intervals[i].stride));
      after = int64_t{table.intervals[i].last} + 1;
    }
  }
  std::vector<uint8_t> bytes(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(kHeaderSize + header.head_length));
  bytes.insert(bytes.end(), out.written().begin(), out.written().end());
  bytes.insert(bytes.end(), good.begin() + static_cast<std::ptrdiff_t>(kHeaderSize + header.head_length + header.block_table_length),
               good.end());
  const uint64_t length = out.size(), payload = bytes.size() - kHeaderSize;
  for (int i = 0; i < 8; ++i) {
    bytes[kBlockTableLengthAt + i] = static_cast<uint8_t>(length >> (8 * i));
    bytes[44 + i] = static_cast<uint8_t>(payload >> (8 * i));
  }
  detail::reseal_plan(bytes);
  return bytes;
}

TEST(PlanSlice, AnIndexThatDoesNotMatchTheOpsIsRefused) {
  const Plan plan = varied_plan(12);
  const std::vector<uint8_t> good = encode_plan(plan);
  // Unchanged, the rewriting keeps the file as it was.
  EXPECT_EQ(with_block_table(good, [](detail::BlockTable&) {}), good);

  // Rank 6 left out of the ranks of every block that holds it.
  const auto without_6 = with_block_table(good, [](detail::BlockTable& table) {
    std::vector<detail::RankInterval> intervals;
    for (detail::BlockEntry& block : table.blocks) {
      const uint32_t begin = static_cast<uint32_t>(intervals.size());
      for (uint32_t i = block.intervals_begin; i < block.intervals_end; ++i) {
        const detail::RankInterval interval = table.intervals[i];
        if (interval.first <= 6 && 6 <= interval.last && (6 - interval.first) % interval.stride == 0) {
          if (interval.first < 6) intervals.push_back({interval.first, 6 - interval.stride, interval.stride});
          if (interval.last > 6) intervals.push_back({6 + interval.stride, interval.last, interval.stride});
        } else {
          intervals.push_back(interval);
        }
      }
      block.intervals_begin = begin;
      block.intervals_end = static_cast<uint32_t>(intervals.size());
    }
    table.intervals = intervals;
  });
  // Rank 6 finds none of its ops: its entry says it has some.
  std::string message = slice_error(without_6, 6);
  EXPECT_NE(message.find("rank 6's entry records"), std::string::npos) << message;
  EXPECT_NE(message.find("the per-rank index does not match the ops"), std::string::npos) << message;
  // Rank 4, which reads a block holding rank 6, sees it left out; so does the whole decoder.
  message = slice_error(without_6, 4);
  EXPECT_NE(message.find("rank 6 takes part, but block"), std::string::npos) << message;
  EXPECT_NE(whole_error(without_6).find("rank 6 takes part, but block"), std::string::npos) << whole_error(without_6);

  // Rank 3's entry's digest changed: rank 3 and the whole decoder refuse it, the others do not
  // look at it (each rank checks its own entry; the job's ranks together check every one).
  const detail::HeaderV7 header = detail::parse_header_v7(good, "plan.bin", good.size());
  std::vector<uint8_t> bytes = good;
  {
    const std::string name = "plan.bin";
    detail::ByteReader in{std::span<const uint8_t>(good).subspan(header.chunks_offset()), name, header.chunks_offset()};
    for (int32_t rank = 0; rank <= 3; ++rank) {
      in.varint("gap");
      (void)in.string("name");
      const uint64_t ops = in.varint("ops");
      ASSERT_GT(ops, 0u);
      if (rank == 3) bytes[in.offset()] ^= 1;
      in.fixed64("digest");
    }
  }
  detail::reseal_plan(bytes);
  message = slice_error(bytes, 3);
  EXPECT_NE(message.find("rank 3's entry records"), std::string::npos) << message;
  EXPECT_EQ(slice_error(bytes, 2), "accepted");
  EXPECT_NE(whole_error(bytes).find("rank 3's entry records"), std::string::npos) << whole_error(bytes);
  EXPECT_EQ(error_of([&] { (void)decode_job_plan(bytes, "plan.bin"); }), "accepted");
}

// What each rank checks of its ops and of the plan's fields.
TEST(PlanSlice, ItsOpsAndThePlansFieldsAreChecked) {
  Plan plan = varied_plan(12);
  plan.schedules[1].steps.edit()[0].ops[0].group.push_back(40);  // a member outside the world
  const std::vector<uint8_t> bytes = encode_plan(plan);
  const int32_t root = plan.schedules[1].steps[0].ops[0].root;
  const std::string message = slice_error(bytes, root);
  EXPECT_NE(message.find("verify: schedule 1 (hierarchical): step 0 op 0"), std::string::npos) << message;
  EXPECT_NE(message.find("group member 40 is not among the 12 ranks"), std::string::npos) << message;
  // The runtime's whole decode refuses ranks outside the world (no slice would check that op).
  EXPECT_NE(error_of([&] { (void)decode_job_plan(bytes, "plan.bin"); }).find("rank 40 is not among the 12 ranks"),
            std::string::npos);

  Plan overlapping = varied_plan(12);
  overlapping.schedules[1].min_bytes = 10;
  const std::string fields = slice_error(encode_plan(overlapping), 7);
  EXPECT_NE(fields.find("both serve"), std::string::npos) << fields;
  EXPECT_THROW((void)read_rank_slice(encode_plan(varied_plan(12)), "plan.bin", 12), std::invalid_argument);
  EXPECT_THROW((void)read_rank_slice(encode_plan(varied_plan(12)), "plan.bin", -1), std::invalid_argument);
}

// write_plan_file marks the plan verified; encode_plan does not. The runtime's load checks a
// marked plan by parts (no symbolic execution), any other as before format 7 (its share of the
// symbolic execution): a wrong plan written unverified is still caught at job start, and one
// whose flag lies is caught only by `flexplan verify` (docs/ir.md, "Loading at job start").
TEST(PlanSlice, OnlyAPlanVerifiedWhenWrittenIsCheckedByParts) {
  const Plan plan = varied_plan(12);
  const std::vector<uint8_t> plain = encode_plan(plan), verified = encode_verified_plan(plan);
  EXPECT_FALSE(verified_when_written(plain, "plain.bin"));
  EXPECT_TRUE(verified_when_written(verified, "verified.bin"));
  EXPECT_FALSE(read_rank_slice(plain, "plain.bin", 3).verified_when_written);
  EXPECT_TRUE(read_rank_slice(verified, "verified.bin", 3).verified_when_written);
  EXPECT_EQ(decode_fingerprinted_plan(plain, "plain.bin").fingerprint,
            decode_fingerprinted_plan(verified, "verified.bin").fingerprint)
      << "the flag says who vouches for the plan, not what it is";
  EXPECT_FALSE(verified_when_written(encode_plan_version6(plan), "old.bin"));

  Plan wrong = plan;
  wrong.schedules[0].steps.edit()[0].ops[0].root = 0;  // well formed, but the sum goes astray
  EXPECT_THROW((void)encode_verified_plan(wrong), VerifyError);
  const auto dir = std::filesystem::temp_directory_path();
  const std::string unverified = (dir / fmt::format("flexplan-unverified-{}.bin", ::getpid())).string();
  const std::string lying = (dir / fmt::format("flexplan-lying-{}.bin", ::getpid())).string();
  std::vector<uint8_t> marked = encode_plan(wrong);
  detail::mark_verified(marked);
  for (const auto& [path, bytes] : {std::pair{unverified, encode_plan(wrong)}, std::pair{lying, marked}}) {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  }
  bool some_rank_refuses = false;
  for (int32_t rank = 0; rank < 12; ++rank) {
    some_rank_refuses |= error_of([&] { (void)load_job_plan(unverified, 12, rank); }) != "accepted";
    EXPECT_EQ(error_of([&] { (void)load_job_plan(lying, 12, rank); }), "accepted") << rank;
  }
  EXPECT_TRUE(some_rank_refuses);
  EXPECT_THROW((void)read_plan_file(lying), VerifyError);
  std::filesystem::remove(unverified);
  std::filesystem::remove(lying);
}

// A world far larger than the plan's ops: entries only for the ranks that take part, so that the
// file stays small; every rank of the world can read its (maybe empty) part.
TEST(PlanSlice, AHugeWorldCostsNothing) {
  Plan plan;
  plan.world_size = INT32_MAX;
  plan.schedules = {compact_pipeline(testing::ring_schedule(4), 2)};
  const std::vector<uint8_t> bytes = encode_plan(plan);
  EXPECT_LT(bytes.size(), 1000u);
  EXPECT_EQ(decode_plan_unverified(bytes, "mem"), plan);
  expect_slice_of(plan, read_rank_slice(bytes, "mem", 2), 2);
  const RankSlice far = read_rank_slice(bytes, "mem", 1'000'000'000);
  EXPECT_EQ(far.ops, 0u);
  expect_slice_of(plan, far, 1'000'000'000);
}

}  // namespace
}  // namespace flexplan::ir
