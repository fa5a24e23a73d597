// plan.bin: round trips, and every kind of corruption rejected with a clear PlanFormatError.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <functional>
#include <fstream>
#include <string>

#include "ir/byte_io.hpp"
#include "ir/pipeline_form.hpp"
#include "ir/plan_binary.hpp"
#include "ir/plan_sections.hpp"
#include "ir/plan_text.hpp"
#include "ir/verify.hpp"
#include "tests/unit/ir_test_plans.hpp"

namespace flexplan::ir {
namespace {

// Header offsets, as docs/ir.md lays them out (format 7).
constexpr size_t kVersionAt = 8, kFlagsAt = 12, kWriterAt = 16, kHashAt = 32, kWorldAt = 40,
                 kLengthAt = 44, kHeaderChecksumAt = 92, kHeaderSize = 100;
// Format 6, still read whole: its checksum covers the header before it and the payload.
constexpr size_t kChecksumAtV6 = 52, kHeaderSizeV6 = 60;

std::string format_error(std::span<const uint8_t> bytes) {
  try {
    decode_plan(bytes, "plan.bin");
  } catch (const PlanFormatError& e) {
    return e.what();
  }
  return "";
}

void put_le(std::vector<uint8_t>& bytes, size_t at, uint64_t value, int width) {
  for (int i = 0; i < width; ++i) bytes[at + i] = static_cast<uint8_t>(value >> (8 * i));
}

// Recomputes every checksum (and format 7's fingerprint), so a test can plant a well-formed file
// with hostile contents.
void reseal(std::vector<uint8_t>& bytes) { detail::reseal_plan(bytes); }

// Both formats this flexplan reads.
const std::function<std::vector<uint8_t>(const Plan&)> kEncoders[] = {encode_plan, encode_plan_version6};

TEST(IrBinary, RoundTripsExactly) {
  Plan plan = testing::two_range_plan(6);
  plan.rank_names[3] = "switch/m0/gpu \"3\"\n";
  plan.schedules[1].steps.edit()[0].level = -2;
  plan.schedules[0].min_bytes = 0;
  plan.schedules[1].max_bytes.reset();
  EXPECT_EQ(decode_plan(encode_plan(plan), "mem"), plan);

  Plan bare = plan;
  bare.topology_hash.clear();
  bare.topology_name.clear();
  bare.rank_names.clear();
  EXPECT_EQ(decode_plan(encode_plan(bare), "mem"), bare);
  // Format 6 files are still read.
  EXPECT_EQ(decode_plan(encode_plan_version6(plan), "mem"), plan);
  EXPECT_EQ(decode_plan(encode_plan_version6(bare), "mem"), bare);
}

// A world of one rank: its ops name rank 0 alone, written as a progression of stride 1, which
// the reader once refused as reaching beyond the world (found by the plan_text fuzzer).
TEST(IrBinary, AWorldOfOneRankRoundTrips) {
  const Plan plan = parse_plan_text(
      "flexplan-plan 1\nworld_size 1\ntopology \"t\" -\n"
      "schedule one allreduce bytes 0..inf units 2\n"
      "  step reduce level 0\n    reduce [0,2) root 0 group 0\n",
      "one.plan");
  ASSERT_EQ(plan.world_size, 1);
  EXPECT_EQ(decode_plan(encode_plan(plan), "mem"), plan);
}

// The fingerprint the ranks compare: the same for the same plan however it reaches them (decoded
// from a file, computed from memory, written by another flexplan version), different when any
// part of the plan differs.
TEST(IrBinary, FingerprintCoversThePlanNotTheWriter) {
  const Plan plan = testing::two_range_plan(6);
  std::vector<uint8_t> bytes = encode_plan(plan);
  const uint64_t fingerprint = plan_fingerprint(plan);
  EXPECT_EQ(decode_fingerprinted_plan(bytes, "mem").fingerprint, fingerprint);
  EXPECT_EQ(decode_fingerprinted_plan(bytes, "mem").plan, plan);

  bytes[kWriterAt] = '9';  // another writer's version string
  reseal(bytes);
  EXPECT_EQ(decode_fingerprinted_plan(bytes, "mem").fingerprint, fingerprint);

  auto differs = [&](const std::function<void(Plan&)>& change) {
    Plan other = plan;
    change(other);
    const uint64_t changed = plan_fingerprint(other);
    EXPECT_EQ(decode_fingerprinted_plan(encode_plan(other), "mem").fingerprint, changed);
    return changed != fingerprint;
  };
  EXPECT_TRUE(differs([](Plan& p) { p.topology_hash = "fedcba9876543210"; }));
  EXPECT_TRUE(differs([](Plan& p) { p.topology_hash.clear(); }));
  // Header fields alone: the world size of a plan without learner names (so that the payload
  // stays the same), and the flag alone (a zero hash given against none).
  Plan unnamed = plan;
  unnamed.rank_names.clear();
  unnamed.topology_hash.clear();
  Plan wider = unnamed;
  wider.world_size += 1;
  Plan zero_hash = unnamed;
  zero_hash.topology_hash = "0000000000000000";
  EXPECT_NE(plan_fingerprint(wider), plan_fingerprint(unnamed));
  EXPECT_NE(plan_fingerprint(zero_hash), plan_fingerprint(unnamed));
  EXPECT_EQ(decode_fingerprinted_plan(encode_plan(zero_hash), "mem").fingerprint,
            plan_fingerprint(zero_hash));
  EXPECT_TRUE(differs([](Plan& p) {
    p.world_size += 1;
    p.rank_names.push_back("m9/gpu0");
  }));
  EXPECT_TRUE(differs([](Plan& p) { p.rank_names[2] += "x"; }));
  EXPECT_TRUE(differs([](Plan& p) { p.schedules[1].steps.edit()[0].ops[0].end += 1; }));
  EXPECT_TRUE(differs([](Plan& p) { p.schedules[0].min_bytes += 1; }));
}

// The shape of every op survives, whether its group is coded as a list or as edits.
TEST(IrBinary, StarOpsRoundTrip) {
  Plan plan = testing::two_range_plan(6);
  size_t stars = 0;
  for (auto& schedule : plan.schedules)
    for (auto& step : schedule.steps.edit())
      for (size_t o = 0; o < step.ops.size(); o += 2) {
        step.ops[o].shape = OpShape::Star;
        ++stars;
      }
  ASSERT_GT(stars, 0u);
  const Plan decoded = decode_plan_unverified(encode_plan(plan), "mem");
  EXPECT_EQ(decoded, plan);
}

TEST(IrBinary, RoundTripsHugeValues) {
  Plan plan = testing::plan_of({}, 2);
  Schedule schedule;
  schedule.algorithm = "wide";
  schedule.units = UINT64_MAX;
  schedule.min_bytes = UINT64_MAX - 1;
  schedule.steps = {Step{Phase::ReduceScatter, 0, {Op{OpKind::Reduce, 0, UINT64_MAX, 1, {0, 1}}}},
                    Step{Phase::AllGather, 0, {Op{OpKind::Broadcast, 0, UINT64_MAX, 1, {1, 0}}}}};
  Schedule below = schedule;  // every plan serves every size: this takes the rest
  below.min_bytes = 0;
  below.max_bytes = UINT64_MAX - 1;
  plan.schedules = {schedule, below};
  EXPECT_EQ(decode_plan(encode_plan(plan), "mem"), plan);
}

TEST(IrBinary, HeaderHoldsTheDocumentedFields) {
  const Plan plan = testing::two_range_plan(5);
  const auto bytes = encode_plan(plan);
  ASSERT_GE(bytes.size(), kHeaderSize);
  EXPECT_EQ(std::string(bytes.begin(), bytes.begin() + 8), std::string("FLXPLAN\0", 8));
  EXPECT_EQ(bytes[kVersionAt], kPlanFormatVersion);
  EXPECT_EQ(bytes[kFlagsAt], 1);
  EXPECT_EQ(bytes[kWorldAt], 5);
  EXPECT_EQ(bytes[kHashAt], 0xef);  // "0123456789abcdef", little-endian
  EXPECT_EQ(bytes[kHashAt + 7], 0x01);
  uint64_t length = 0;
  for (int i = 0; i < 8; ++i) length |= static_cast<uint64_t>(bytes[kLengthAt + i]) << (8 * i);
  EXPECT_EQ(length, bytes.size() - kHeaderSize);
}

TEST(IrBinary, EveryHeaderFieldIsChecked) {
  const auto good = encode_plan(testing::two_range_plan(4));
  auto corrupt = [&](size_t at, uint8_t value) {
    auto bytes = good;
    bytes[at] = value;
    return format_error(bytes);
  };
  EXPECT_NE(corrupt(0, 'G').find("plan.bin: byte 0: not a flexplan plan.bin (bad magic)"),
            std::string::npos);
  EXPECT_NE(corrupt(kVersionAt, kPlanFormatVersion + 1)
                .find(fmt::format("byte 8: plan.bin format version {} is not supported",
                                  kPlanFormatVersion + 1)),
            std::string::npos);
  EXPECT_NE(corrupt(kVersionAt, 2).find("byte 8: plan.bin format version 2 is not supported"),
            std::string::npos);
  // The header's checksum covers every other field of it, the lengths included.
  for (size_t at : {kFlagsAt, kWriterAt, kHashAt, kWorldAt, kLengthAt, size_t{52}, size_t{60}, size_t{84}})
    EXPECT_NE(corrupt(at, good[at] ^ 1).find("byte 92: header checksum mismatch"), std::string::npos)
        << at << ": " << corrupt(at, good[at] ^ 1);
  EXPECT_NE(corrupt(kHeaderChecksumAt, good[kHeaderChecksumAt] ^ 1).find("byte 92: header checksum mismatch"),
            std::string::npos);

  // Fields behind a valid checksum are still range-checked.
  auto bytes = good;
  put_le(bytes, kFlagsAt, 6, 4);
  reseal(bytes);
  EXPECT_NE(format_error(bytes).find("byte 12: unknown flags 0x6"), std::string::npos)
      << format_error(bytes);
  bytes = good;
  put_le(bytes, kWorldAt, 0, 4);
  reseal(bytes);
  EXPECT_NE(format_error(bytes).find("byte 40: world size 0 is out of range"), std::string::npos)
      << format_error(bytes);
  // A topology hash without its flag: two codings of one plan, so refused.
  bytes = good;
  put_le(bytes, kFlagsAt, 0, 4);
  reseal(bytes);
  EXPECT_NE(format_error(bytes).find("byte 32: topology hash"), std::string::npos)
      << format_error(bytes);
  // A length past the payload, and lengths that leave nothing for the sections after them.
  bytes = good;
  put_le(bytes, kLengthAt, good.size() - kHeaderSize + 1, 8);
  reseal(bytes);
  EXPECT_NE(format_error(bytes).find("truncated"), std::string::npos) << format_error(bytes);
  bytes = good;
  put_le(bytes, 60, good.size(), 8);  // the head's length
  reseal(bytes);
  EXPECT_NE(format_error(bytes).find("byte 60: the head length"), std::string::npos) << format_error(bytes);
}

TEST(IrBinary, EveryHeaderFieldIsCheckedInFormat6) {
  const auto good = encode_plan_version6(testing::two_range_plan(4));
  auto corrupt = [&](size_t at, uint8_t value) {
    auto bytes = good;
    bytes[at] = value;
    return format_error(bytes);
  };
  EXPECT_EQ(good[kVersionAt], 6);
  EXPECT_NE(corrupt(kFlagsAt, 3).find("checksum mismatch"), std::string::npos);
  EXPECT_NE(corrupt(kWriterAt, 'x').find("checksum mismatch"), std::string::npos);
  EXPECT_NE(corrupt(kHashAt, 0).find("checksum mismatch"), std::string::npos);
  EXPECT_NE(corrupt(kWorldAt, 9).find("checksum mismatch"), std::string::npos);
  EXPECT_NE(corrupt(kLengthAt, good[kLengthAt] + 1).find("truncated"), std::string::npos);
  EXPECT_NE(corrupt(kLengthAt, good[kLengthAt] - 1).find("trailing bytes"), std::string::npos);
  EXPECT_NE(corrupt(kChecksumAtV6, good[kChecksumAtV6] ^ 1).find("byte 52: checksum mismatch"),
            std::string::npos);
  auto bytes = good;
  put_le(bytes, kFlagsAt, 6, 4);
  reseal(bytes);
  EXPECT_NE(format_error(bytes).find("byte 12: unknown flags 0x6"), std::string::npos)
      << format_error(bytes);
}

TEST(IrBinary, EveryFlippedPayloadByteIsRejected) {
  for (const auto& encode : kEncoders) {
    const auto good = encode(testing::two_range_plan(3));
    for (size_t at = kHeaderSizeV6; at < good.size(); ++at) {
      for (uint8_t mask : {0x01, 0x80}) {
        auto bytes = good;
        bytes[at] ^= mask;
        const std::string message = format_error(bytes);
        EXPECT_TRUE(message.find("corrupted") != std::string::npos || message.find("checksum mismatch") != std::string::npos)
            << "format " << int{good[kVersionAt]} << ", byte " << at << ": " << message;
      }
    }
  }
}

TEST(IrBinary, EveryTruncationIsRejected) {
  for (const auto& encode : kEncoders) {
    const auto good = encode(testing::two_range_plan(3));
    for (size_t size = 0; size < good.size(); ++size) {
      const std::string message = format_error(std::span(good).first(size));
      EXPECT_FALSE(message.empty()) << "truncated to " << size << " bytes was accepted";
      const bool named = message.find("truncated") != std::string::npos ||
                         message.find("the file is empty") != std::string::npos;
      EXPECT_TRUE(named) << size << ": " << message;
    }
  }
}

TEST(IrBinary, TrailingBytesAreRejected) {
  for (const auto& encode : kEncoders) {
    auto bytes = encode(testing::two_range_plan(3));
    bytes.push_back(0);
    EXPECT_NE(format_error(bytes).find("1 trailing bytes"), std::string::npos) << format_error(bytes);
  }
}

TEST(IrBinary, HostileLengthsAreCheckedBeforeUse) {
  // Format 6's payload, which codes schedules as format 7's head does.
  // A well-sealed file whose payload claims a 2^62-byte topology name, then one claiming 2^40
  // schedules: both must fail on the count, not try to allocate.
  const auto bytes = encode_plan_version6(testing::plan_of({}, 1));
  auto hostile = std::vector<uint8_t>(bytes.begin(), bytes.begin() + kHeaderSizeV6);
  const uint8_t huge[] = {0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x40};  // 2^62
  hostile.insert(hostile.end(), std::begin(huge), std::end(huge));
  put_le(hostile, kLengthAt, hostile.size() - kHeaderSizeV6, 8);
  reseal(hostile);
  EXPECT_NE(
      format_error(hostile).find(
          "byte 60: topology name 4611686018427387904 exceeds what the 0 remaining bytes can hold"),
      std::string::npos)
      << format_error(hostile);

  hostile.resize(kHeaderSizeV6);
  const uint8_t many_schedules[] = {0x00, 0x00, 0x80, 0x80,
                                    0x80, 0x80, 0x80, 0x20};  // no names, 2^40 schedules
  hostile.insert(hostile.end(), std::begin(many_schedules), std::end(many_schedules));
  put_le(hostile, kLengthAt, hostile.size() - kHeaderSizeV6, 8);
  reseal(hostile);
  EXPECT_NE(format_error(hostile).find("byte 62: schedule count"), std::string::npos)
      << format_error(hostile);

  hostile.resize(kHeaderSizeV6);
  // No names, one schedule named "", allreduce, then min bytes as a varint past 64 bits.
  const uint8_t overlong[] = {0x00, 0x00, 0x01, 0x00, 0x00, 0x80, 0x80, 0x80,
                              0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x7f};
  hostile.insert(hostile.end(), std::begin(overlong), std::end(overlong));
  put_le(hostile, kLengthAt, hostile.size() - kHeaderSizeV6, 8);
  reseal(hostile);
  EXPECT_NE(format_error(hostile).find("byte 65: min bytes does not fit in 64 bits"),
            std::string::npos)
      << format_error(hostile);
}

// Strings are UTF-8 (docs/ir.md): a name that is not is refused where it is decoded, so that
// every printed form (text, JSON) of a loaded plan can hold it.
TEST(IrBinary, StringsMustBeUtf8) {
  const Plan good = testing::two_range_plan(3);
  // Format 6, at its offsets within the payload: topology name "test-cluster" (1 + 12 bytes),
  // rank name count, then the first rank name's length and bytes.
  for (const std::string& bad : {std::string("gpu\xff"), std::string("\xc0\x80"),
                                 std::string("\xed\xa0\x80"), std::string("\xf4\x90\x80\x80"),
                                 std::string("gpu\xe2\x82")}) {
    Plan plan = good;
    plan.rank_names[0] = bad;
    const std::string message = format_error(encode_plan_version6(plan));
    EXPECT_NE(message.find("plan.bin: byte 75: rank name 0 is not valid UTF-8"), std::string::npos)
        << message;
  }
  Plan plan = good;
  plan.schedules[1].algorithm = "tr\xff" "ee";
  EXPECT_NE(format_error(encode_plan_version6(plan)).find("algorithm name is not valid UTF-8"),
            std::string::npos)
      << format_error(encode_plan_version6(plan));
  plan = good;
  plan.topology_name = "\x80";
  EXPECT_NE(format_error(encode_plan_version6(plan)).find("byte 61: topology name is not valid UTF-8"),
            std::string::npos)
      << format_error(encode_plan_version6(plan));
  plan = good;
  plan.rank_names[2] = "caf\xc3\xa9 \xf0\x9f\x9a\x80";  // valid: two- and four-byte forms
  EXPECT_EQ(decode_plan(encode_plan(plan), "mem"), plan);
  EXPECT_EQ(decode_plan(encode_plan_version6(plan), "mem"), plan);
  // Format 7: the names in the per-rank chunks, the rest in the head.
  plan = good;
  plan.rank_names[0] = "gpu\xff";
  EXPECT_NE(format_error(encode_plan(plan)).find("rank name 0 is not valid UTF-8"), std::string::npos)
      << format_error(encode_plan(plan));
  plan = good;
  plan.topology_name = "\x80";
  EXPECT_NE(format_error(encode_plan(plan)).find("byte 101: topology name is not valid UTF-8"), std::string::npos)
      << format_error(encode_plan(plan));
}

// Ops are coded relative to the op before them: a group that differs from the previous op's
// in a few members costs a few bytes, however large it is.
TEST(IrBinary, NeighbouringOpsAreCodedCompactly) {
  const int32_t p = 4096;
  Schedule schedule;
  schedule.algorithm = "wide";
  schedule.units = 1 << 20;
  Step step{Phase::ReduceScatter, 3, {}};
  std::vector<int32_t> group;
  for (int32_t i = 0; i < 64; ++i) group.push_back(i * 64);
  for (int32_t k = 0; k < 1000; ++k) {
    group[static_cast<size_t>(k % 64)] += 1;  // one member moves on, as at a tree level's pieces
    step.ops.push_back(Op{k % 2 ? OpKind::Broadcast : OpKind::Reduce, uint64_t(k) * 1000,
                          uint64_t(k) * 1000 + 999, group[static_cast<size_t>(k % 64)], group});
  }
  schedule.steps = {step, step};
  schedule.steps.edit()[1].ops[500].group.pop_back();  // a size change: coded as a list again
  schedule.steps.edit()[1].ops[501].group[0] = 0;      // an edit back to a smaller rank
  const Plan plan = testing::plan_of({schedule}, p);
  const auto bytes = encode_plan(plan);
  // Each rank's entry (format 7) holds its name, op count and digest: about 27 bytes here.
  EXPECT_LT(bytes.size() - kHeaderSize, 2 * 1000 * 16 + p * 32) << "64-member groups, 2000 ops";
  EXPECT_EQ(decode_plan_unverified(bytes, "mem"), plan);
}

// The decoder's message for hostile bytes, or "accepted".
std::string decode_error(const std::vector<uint8_t>& bytes) {
  try {
    decode_plan_unverified(bytes, "plan.bin");
  } catch (const PlanFormatError& e) {
    return std::string(e.what());
  }
  return "accepted";
}

// A sealed plan.bin whose payload after the topology name and rank names (none) is written
// field by field by `schedules`, for hostile codings: format 6, whose payload codes the
// schedules' fields as format 7's head does and the ops as its blocks do.
std::vector<uint8_t> sealed_payload(int32_t world_size,
                                    const std::function<void(detail::ByteWriter&)>& schedules) {
  detail::ByteWriter payload;
  payload.string("");  // topology name
  payload.varint(0);   // no rank names
  schedules(payload);
  auto bytes = encode_plan_version6(testing::plan_of({}, world_size));
  bytes.resize(kHeaderSizeV6);
  bytes.insert(bytes.end(), payload.buffer().begin(), payload.buffer().end());
  put_le(bytes, kLengthAt, bytes.size() - kHeaderSizeV6, 8);
  reseal(bytes);
  return bytes;
}

// A schedule's fields up to its slice count.
void schedule_head(detail::ByteWriter& payload, const std::string& algorithm, uint64_t units, uint64_t slices) {
  payload.string(algorithm);
  payload.varint(0);  // allreduce
  payload.varint(0);  // min bytes
  payload.varint(0);  // no max
  payload.varint(units);
  payload.varint(slices);  // 1: not written as a pipeline
}

// One op reducing [0, 4) from rank 1 to rank 0, the first of its step.
void write_one_reduce(detail::ByteWriter& out) {
  out.varint(0);  // reduce, group list, chain
  out.signed_varint(0);
  out.varint(4);
  out.signed_varint(0);
  out.varint(1);
  out.signed_varint(1);
}

// A schedule's steps written out: one step holding that op alone.
void write_one_step(detail::ByteWriter& out) {
  out.varint(1);  // one step
  out.varint(0);  // phase
  out.signed_varint(0);
  out.varint(1);  // one op
  write_one_reduce(out);
}

// One schedule of one step, its ops written by `ops`.
std::vector<uint8_t> sealed_plan(int32_t world_size, const std::function<void(detail::ByteWriter&)>& ops,
                                 uint64_t op_count, const std::string& algorithm = "x",
                                 uint64_t slices = 1, uint64_t units = 8) {
  return sealed_payload(world_size, [&](detail::ByteWriter& payload) {
    payload.varint(1);  // one schedule
    schedule_head(payload, algorithm, units, slices);
    payload.varint(0);  // its steps follow (not an earlier schedule's)
    payload.varint(1);  // one step
    payload.varint(0);  // phase
    payload.signed_varint(0);
    payload.varint(op_count);
    ops(payload);
  });
}

TEST(IrBinary, HostileOpCodingsAreRejected) {
  auto op = [](detail::ByteWriter& out, uint64_t head, int64_t begin, uint64_t length,
               int64_t root) {
    out.varint(head);
    out.signed_varint(begin);
    out.varint(length);
    out.signed_varint(root);
  };
  // The first op of a step cannot edit a group before it.
  std::string message = decode_error(sealed_plan(4, [&](auto& out) {
    op(out, 2, 0, 8, 0);
    out.varint(0);
  }, 1));
  EXPECT_NE(message.find("the first op of a step cannot edit the group"), std::string::npos)
      << message;
  // A root below 0 or a member past 2^31 - 1, reached by differences.
  message = decode_error(sealed_plan(4, [&](auto& out) {
    op(out, 0, 0, 8, -1);
    out.varint(0);
  }, 1));
  EXPECT_NE(message.find("op root 0 -1 is not a rank"), std::string::npos) << message;
  message = decode_error(sealed_plan(4, [&](auto& out) {
    op(out, 0, 0, 8, 1);
    out.varint(2);
    out.signed_varint(0);
    out.signed_varint(int64_t{1} << 40);
  }, 1));
  EXPECT_NE(message.find("group member 1 +1099511627776 is not a rank"), std::string::npos)
      << message;
  // Edits past the end of the previous group, and more edits than members.
  message = decode_error(sealed_plan(4, [&](auto& out) {
    op(out, 0, 0, 4, 0);
    out.varint(2);
    out.signed_varint(0);
    out.signed_varint(1);
    op(out, 2, 0, 4, 1);
    out.varint(1);
    out.varint(2);  // position 2 of a 2-member group
    out.signed_varint(1);
  }, 2));
  EXPECT_NE(message.find("group edit position skips past the end of the group of 2"),
            std::string::npos)
      << message;
  message = decode_error(sealed_plan(4, [&](auto& out) {
    op(out, 0, 0, 4, 0);
    out.varint(1);
    out.signed_varint(0);
    op(out, 2, 0, 4, 1);
    out.varint(2);
    for (int i = 0; i < 4; ++i) out.varint(0);
  }, 2));
  EXPECT_NE(message.find("2 group edits for a group of 1"), std::string::npos) << message;
  // An unknown op head.
  message = decode_error(sealed_plan(4, [&](auto& out) {
    op(out, 8, 0, 8, 0);
    out.varint(0);
  }, 1));
  EXPECT_NE(message.find("op kind, group form and shape 8 exceeds 7"), std::string::npos)
      << message;
  // A begin before 0 wraps around and then overflows with its length.
  message = decode_error(sealed_plan(4, [&](auto& out) {
    op(out, 0, -1, 2, 0);
    out.varint(1);
    out.signed_varint(0);
  }, 1));
  EXPECT_NE(message.find("op end overflows 64 bits"), std::string::npos) << message;
}

// plan.bin codes a range as its begin and length: one that ends before it begins cannot be
// written (found by fuzzing the text form, which now refuses it as well).
TEST(IrBinary, RangesEndingBeforeTheyBeginCannotBeWritten) {
  Plan plan = testing::two_range_plan(3);
  plan.schedules[0].steps.edit()[0].ops[0].begin = 2;
  plan.schedules[0].steps.edit()[0].ops[0].end = 1;
  try {
    encode_plan(plan);
    ADD_FAILURE() << "encoded";
  } catch (const PlanFormatError& e) {
    EXPECT_NE(std::string(e.what()).find("[2,1) ends before it begins"), std::string::npos)
        << e.what();
  }
}

TEST(IrBinary, LoadingVerifiesThePlan) {
  Plan plan = testing::two_range_plan(4);
  plan.schedules[0].steps.pop_back();
  const auto bytes = encode_plan(plan);  // encoding alone does not verify
  EXPECT_NO_THROW(decode_plan_unverified(bytes, "mem"));
  try {
    decode_plan(bytes, "mem");
    FAIL() << "decode_plan accepted a wrong schedule";
  } catch (const VerifyError& e) {
    EXPECT_NE(std::string(e.what()).find("schedule 0 (ring): after the last step"),
              std::string::npos)
        << e.what();
  }
}

TEST(IrBinary, FilesRoundTripAndWritingVerifies) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("flexplan-ir-binary-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "plan.bin").string();
  const Plan plan = testing::two_range_plan(7);
  write_plan_file(path, plan);
  EXPECT_EQ(read_plan_file(path), plan);
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));

  Plan wrong = plan;
  wrong.schedules[1].steps.edit()[0].ops.pop_back();
  EXPECT_THROW(write_plan_file((dir / "wrong.bin").string(), wrong), VerifyError);
  EXPECT_FALSE(std::filesystem::exists(dir / "wrong.bin"));

  try {
    read_plan_file((dir / "missing.bin").string());
    FAIL();
  } catch (const PlanFormatError& e) {
    EXPECT_NE(std::string(e.what()).find("missing.bin: cannot open"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(write_plan_file((dir / "no-such-dir" / "plan.bin").string(), plan), PlanFormatError);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace flexplan::ir

namespace flexplan::ir {
namespace {

// A pipeline is written as its base and slice count and read back so, compact (docs/ir.md).
TEST(IrBinary, PipelinesAreWrittenAsTheirBase) {
  const Schedule base = testing::ring_schedule(6);
  const Schedule piped = expand_pipeline(base, 8);
  const auto full = encode_plan(testing::plan_of({base}, 6));
  const auto bytes = encode_plan(testing::plan_of({piped}, 6));
  EXPECT_LT(bytes.size(), full.size() + 16) << "an @8 pipeline costs about its base";
  // Read back as written: compact, the expansion once materialized.
  EXPECT_EQ(decode_plan(bytes, "mem"), testing::plan_of({compact_pipeline(base, 8)}, 6));
  EXPECT_EQ(materialize(decode_plan(bytes, "mem")), testing::plan_of({piped}, 6));
  // Named as a pipeline but not one: written in full, read back as it was.
  Schedule not_piped = piped;
  not_piped.steps.edit()[3].ops[0].group = {not_piped.steps.edit()[3].ops[0].root};
  const Plan odd = testing::plan_of({not_piped}, 6);
  EXPECT_EQ(decode_plan_unverified(encode_plan(odd), "mem"), odd);
}

TEST(IrBinary, BadPipelineFormsAreRejected) {
  const auto one_op = write_one_reduce;
  EXPECT_EQ(decode_error(sealed_plan(2, one_op, 1, "x@2", 2, 8)), "accepted");
  EXPECT_NE(decode_error(sealed_plan(2, one_op, 1, "x@2", 0, 8)).find("pipeline slices 0 out of range"),
            std::string::npos);
  EXPECT_NE(decode_error(sealed_plan(2, one_op, 1, "x@2", 5000, 8)).find("out of range"),
            std::string::npos);
  EXPECT_NE(decode_error(sealed_plan(2, one_op, 1, "x@3", 2, 8)).find("must end in '@2'"),
            std::string::npos);
  EXPECT_NE(decode_error(sealed_plan(2, one_op, 1, "x@2", 2, 7)).find("units divide"),
            std::string::npos);
  EXPECT_NE(decode_error(sealed_plan(2, one_op, 1, "@2", 2, 8)).find("must end in"),
            std::string::npos)
      << "a name that is only the suffix";
  // A base range beyond the base's units would run into the next slice, or wrap past 2^64 in the
  // expansion (found by the fuzzer through the text round trip).
  const std::string beyond = decode_error(sealed_plan(2, one_op, 1, "x@2", 2, 6));
  EXPECT_NE(beyond.find("op 0 of its base's step 0 covers units [0, 4), beyond the base's 3"), std::string::npos)
      << beyond;
}

// Pipelines of one base at several slice counts: the steps are written once, and later
// schedules name the earlier one (format 5); a name past the schedules before it, or onto
// steps of other units, is refused.
TEST(IrBinary, RepeatedStepsAreWrittenOnce) {
  Schedule base;
  base.algorithm = "fan";
  base.units = 64;
  for (int s = 0; s < 3; ++s) {
    Step step{Phase::ReduceScatter, s, {}};
    for (int32_t r = 0; r < 8; ++r)
      step.ops.push_back(Op{OpKind::Reduce, uint64_t(r) * 8, uint64_t(r) * 8 + 8, r, {(r + 1) % 8, (r + 3) % 8}});
    base.steps.push_back(step);
  }
  const Plan one = testing::plan_of({compact_pipeline(base, 2)}, 8);
  Plan three = testing::plan_of({compact_pipeline(base, 2), compact_pipeline(base, 4), compact_pipeline(base, 8)}, 8);
  three.schedules[1].min_bytes = 100;
  three.schedules[2].min_bytes = 200;
  const auto one_bytes = encode_plan(one), three_bytes = encode_plan(three);
  EXPECT_LT(three_bytes.size() - one_bytes.size(), 40u) << "the two later pipelines name the first's steps";
  const Plan decoded = decode_plan_unverified(three_bytes, "mem");
  EXPECT_EQ(decoded, three);
  EXPECT_EQ(decoded.schedules[2].steps, base.steps);

  // Schedule 0 writes one step of one op over a base of 4 units; schedule 1 names it from
  // `back` schedules back, with `units` units in `slices` slices.
  auto two = [&](uint64_t back, uint64_t units, uint64_t slices) {
    return sealed_payload(2, [&](detail::ByteWriter& out) {
      out.varint(2);
      schedule_head(out, "x@2", 8, 2);
      out.varint(0);
      write_one_step(out);
      schedule_head(out, "x@" + std::to_string(slices), units, slices);
      out.varint(back);
    });
  };
  EXPECT_EQ(decode_error(two(1, 16, 4)), "accepted");
  // Naming a schedule without steps, and copying more than 16 times what the file wrote out.
  const std::string none = decode_error(sealed_payload(2, [&](detail::ByteWriter& out) {
    out.varint(2);
    schedule_head(out, "x", 8, 1);
    out.varint(0);
    out.varint(0);  // no steps
    schedule_head(out, "x", 8, 1);
    out.varint(1);
  }));
  EXPECT_NE(none.find("takes the steps of schedule 0 ('x'), which has none"), std::string::npos) << none;
  auto named = [&](int copies) {
    return sealed_payload(2, [&](detail::ByteWriter& out) {
      out.varint(1 + static_cast<uint64_t>(copies));
      schedule_head(out, "x", 4, 1);
      out.varint(0);
      write_one_step(out);
      for (int c = 0; c < copies; ++c) {
        schedule_head(out, "x", 4, 1);
        out.varint(1 + static_cast<uint64_t>(c));  // all name the first
      }
    });
  };
  EXPECT_EQ(decode_error(named(16)), "accepted");
  EXPECT_NE(decode_error(named(17)).find("would copy more than 16 times the 1 ops and 1 group members written out"),
            std::string::npos)
      << decode_error(named(17));
  EXPECT_NE(decode_error(two(2, 16, 4)).find("takes the steps of the schedule 2 back, but only 1 come before it"),
            std::string::npos)
      << decode_error(two(2, 16, 4));
  EXPECT_NE(decode_error(two(1, 12, 4)).find("whose 4 units differ from its 3"), std::string::npos)
      << decode_error(two(1, 12, 4));
}

// Two bases interleaved, whole expansions and unpipelined bases among them: each schedule names
// its own base (not merely the one before it), the file's fingerprint is the plan's, steps over
// other units are written again, and a named copy is held to the pipeline limits at its own
// slice count.
TEST(IrBinary, NamedStepsFollowTheirOwnBase) {
  const auto base_of = [](const std::string& name, int32_t shift) {
    Schedule base;
    base.algorithm = name;
    base.units = 48;
    for (int s = 0; s < 2; ++s) {
      Step step{Phase::ReduceScatter, s, {}};
      for (int32_t r = 0; r < 6; ++r)
        step.ops.push_back(Op{OpKind::Reduce, uint64_t(r) * 8, uint64_t(r) * 8 + 8, r, {(r + shift) % 6}});
      base.steps.push_back(step);
    }
    return base;
  };
  const Schedule a = base_of("a", 1), b = base_of("b", 2);
  Plan plan = testing::plan_of({a, compact_pipeline(b, 2), compact_pipeline(a, 2), expand_pipeline(b, 4),
                                compact_pipeline(a, 8), b},
                               6);
  const auto bytes = encode_plan(plan);
  const auto decoded = decode_fingerprinted_plan(bytes, "mem");
  EXPECT_EQ(materialize(decoded.plan), materialize(plan));
  EXPECT_EQ(decoded.fingerprint, plan_fingerprint(plan));
  EXPECT_EQ(decoded.plan.schedules[4].steps, a.steps);
  EXPECT_EQ(decoded.plan.schedules[5].steps, b.steps);

  // The same steps over other units are not the same schedule's steps: written again.
  Schedule same = a, wider = a;
  same.algorithm = wider.algorithm = "w";
  wider.units = 96;
  const auto named = encode_plan(testing::plan_of({a, same}, 6));
  const auto both = encode_plan(testing::plan_of({a, wider}, 6));
  EXPECT_GT(both.size(), named.size() + 40) << "written out, not named";
  EXPECT_EQ(decode_plan_unverified(both, "mem"), testing::plan_of({a, wider}, 6));

  // 32,000 ops fit at 2 slices; named at 1024 they would be 32.8 million, past the limit.
  Schedule big;
  big.algorithm = "big";
  big.units = 32'000;
  Step step{Phase::ReduceScatter, 0, {}};
  for (uint64_t u = 0; u < big.units; ++u) step.ops.push_back(Op{OpKind::Reduce, u, u + 1, 0, {1}});
  big.steps = {step};
  const std::string past = decode_error(
      encode_plan(testing::plan_of({compact_pipeline(big, 2), compact_pipeline(big, 1024)}, 2)));
  EXPECT_NE(past.find("'big@1024': a pipeline of 1024 slices larger than plan.bin allows"), std::string::npos)
      << past;
}

// Ops in the group-edits form repeat the group before them for a few bytes each: a file may not
// claim more than 64 group members per payload byte (plus a million) that way.
TEST(IrBinary, RepeatedGroupsAreBoundedByTheFileSize) {
  const auto repeats = [](int copies) {
    return sealed_plan(4096, [&](detail::ByteWriter& out) {
      out.varint(0);  // reduce [0, 1) to rank 0 from ranks 1..2000, as a list
      out.signed_varint(0);
      out.varint(1);
      out.signed_varint(0);
      out.varint(2000);
      for (int m = 0; m < 2000; ++m) out.signed_varint(1);
      for (int c = 0; c < copies; ++c) {  // the next unit, the same group: no edits
        out.varint(2);
        out.signed_varint(0);
        out.varint(1);
        out.signed_varint(0);
        out.varint(0);
      }
    }, 1 + static_cast<uint64_t>(copies), "x", 1, 1 + static_cast<uint64_t>(copies));
  };
  EXPECT_EQ(decode_error(repeats(100)), "accepted");
  const auto bytes = repeats(2000);
  EXPECT_LT(bytes.size(), 16'000u);
  EXPECT_NE(decode_error(bytes).find("the ops' groups hold more members than a payload of"), std::string::npos)
      << decode_error(bytes);
}

}  // namespace
}  // namespace flexplan::ir
