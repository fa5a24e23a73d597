// plan.bin: a 60-byte little-endian header, then the varint-coded payload.
//
//   offset size field
//        0    8 magic "FLXPLAN\0"
//        8    4 format version (1)
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
#include <limits>

#include "flexplan/version.hpp"
#include "ir/byte_io.hpp"
#include "ir/file_bytes.hpp"
#include "ir/verify.hpp"

namespace flexplan::ir {

namespace {

constexpr char kMagic[8] = {'F', 'L', 'X', 'P', 'L', 'A', 'N', '\0'};
constexpr size_t kVersionField = 16;
constexpr size_t kChecksumOffset = 52;
constexpr size_t kHeaderSize = 60;
constexpr uint32_t kFlagTopologyHash = 1;
constexpr uint64_t kMaxRank = std::numeric_limits<int32_t>::max();
static_assert(std::string_view(kVersion).size() < kVersionField,
              "version string must fit its field");

void encode_payload(detail::ByteWriter& out, const Plan& plan) {
  out.string(plan.topology_name);
  out.varint(plan.rank_names.size());
  for (const std::string& name : plan.rank_names) out.string(name);
  out.varint(plan.schedules.size());
  for (const Schedule& schedule : plan.schedules) {
    out.string(schedule.algorithm);
    out.varint(static_cast<uint64_t>(schedule.collective));
    out.varint(schedule.min_bytes);
    out.varint(schedule.max_bytes ? 1 : 0);
    if (schedule.max_bytes) out.varint(*schedule.max_bytes);
    out.varint(schedule.units);
    out.varint(schedule.steps.size());
    for (const Step& step : schedule.steps) {
      out.varint(static_cast<uint64_t>(step.phase));
      out.signed_varint(step.level);
      out.varint(step.ops.size());
      for (const Op& op : step.ops) {
        out.varint(static_cast<uint64_t>(op.kind));
        out.varint(op.begin);
        out.varint(op.end - op.begin);
        out.varint(static_cast<uint32_t>(op.root));
        out.varint(op.group.size());
        for (int32_t member : op.group) out.varint(static_cast<uint32_t>(member));
      }
    }
  }
}

Op decode_op(detail::ByteReader& in) {
  Op op;
  op.kind =
      static_cast<OpKind>(in.varint_at_most(static_cast<uint64_t>(OpKind::Broadcast), "op kind"));
  op.begin = in.varint("op begin");
  const size_t length_at = in.offset();
  const uint64_t length = in.varint("op length");
  if (length > std::numeric_limits<uint64_t>::max() - op.begin)
    in.fail_at(length_at, "op end overflows 64 bits");
  op.end = op.begin + length;
  op.root = static_cast<int32_t>(in.varint_at_most(kMaxRank, "op root"));
  op.group.resize(in.count(1, "group size"));
  for (int32_t& member : op.group)
    member = static_cast<int32_t>(in.varint_at_most(kMaxRank, "group member"));
  return op;
}

Schedule decode_schedule(detail::ByteReader& in) {
  Schedule schedule;
  schedule.algorithm = in.utf8_string("algorithm name");
  schedule.collective = static_cast<Collective>(
      in.varint_at_most(static_cast<uint64_t>(Collective::Broadcast), "collective"));
  schedule.min_bytes = in.varint("min bytes");
  if (in.varint_at_most(1, "max bytes flag")) schedule.max_bytes = in.varint("max bytes");
  schedule.units = in.varint("units");
  schedule.steps.resize(in.count(3, "step count"));
  for (Step& step : schedule.steps) {
    step.phase =
        static_cast<Phase>(in.varint_at_most(static_cast<uint64_t>(Phase::Broadcast), "phase"));
    const size_t level_at = in.offset();
    const int64_t level = in.signed_varint("level");
    if (level < std::numeric_limits<int32_t>::min() ||
        level > std::numeric_limits<int32_t>::max()) {
      in.fail_at(level_at, fmt::format("level {} does not fit in 32 bits", level));
    }
    step.level = static_cast<int32_t>(level);
    step.ops.resize(in.count(6, "op count"));
    for (Op& op : step.ops) op = decode_op(in);
  }
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

}  // namespace

bool has_plan_magic(std::span<const uint8_t> bytes) {
  if (bytes.empty()) return false;
  const size_t compared = std::min(bytes.size(), sizeof kMagic);
  return std::memcmp(bytes.data(), kMagic, compared) == 0;
}

std::vector<uint8_t> encode_plan(const Plan& plan) {
  detail::ByteWriter payload;
  encode_payload(payload, plan);

  const bool has_hash = !plan.topology_hash.empty();
  uint64_t hash = 0;
  if (has_hash && !parse_hash_hex(plan.topology_hash, hash)) {
    throw PlanFormatError(
        fmt::format("plan: topology hash '{}' is not 16 lowercase hex digits", plan.topology_hash));
  }
  if (plan.world_size < 1)
    throw PlanFormatError(fmt::format("plan: world size {} must be at least 1", plan.world_size));

  detail::ByteWriter out;
  out.bytes(kMagic, sizeof kMagic);
  out.fixed32(kPlanFormatVersion);
  out.fixed32(has_hash ? kFlagTopologyHash : 0);
  char version[kVersionField] = {};
  std::memcpy(version, kVersion, std::string_view(kVersion).size());
  out.bytes(version, sizeof version);
  out.fixed64(hash);
  out.fixed32(static_cast<uint32_t>(plan.world_size));
  out.fixed64(payload.buffer().size());
  const uint64_t checksum = detail::fnv1a64(payload.buffer(), detail::fnv1a64(out.buffer()));
  out.fixed64(checksum);
  out.bytes(payload.buffer().data(), payload.buffer().size());
  return std::move(out.buffer());
}

Plan decode_plan_unverified(std::span<const uint8_t> bytes, const std::string& source) {
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
  const uint64_t checksum = detail::fnv1a64(payload, detail::fnv1a64(bytes.first(kChecksumOffset)));
  if (checksum != stored_checksum) {
    header.fail_at(
        kChecksumOffset,
        fmt::format("checksum mismatch (stored {:016x}, content gives {:016x}): the file "
                    "is corrupted (written by flexplan '{}')",
                    stored_checksum, checksum, writer_version));
  }
  if (flags & ~kFlagTopologyHash) header.fail_at(12, fmt::format("unknown flags {:#x}", flags));
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
  for (Schedule& schedule : plan.schedules) schedule = decode_schedule(in);
  if (in.remaining() != 0)
    in.fail(fmt::format("{} unread bytes at the end of the payload", in.remaining()));
  return plan;
}

Plan decode_plan(std::span<const uint8_t> bytes, const std::string& source) {
  Plan plan = decode_plan_unverified(bytes, source);
  verify_plan(plan);
  return plan;
}

void write_plan_file(const std::string& path, const Plan& plan) {
  verify_plan(plan);
  const std::vector<uint8_t> bytes = encode_plan(plan);
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
  const std::vector<uint8_t> bytes = detail::read_file_bytes(path);
  return decode_plan(bytes, path);
}

}  // namespace flexplan::ir
