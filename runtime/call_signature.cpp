// Call signatures on the wire, their descriptions and the FLEXPLAN_CHECK_CALLS switch
// (call_signature.hpp).
#include "runtime/call_signature.hpp"

#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

namespace flexplan {

std::string_view to_string(UserCollective collective) {
  switch (collective) {
    case UserCollective::AllReduce: return "allreduce";
    case UserCollective::Broadcast: return "broadcast";
    case UserCollective::AllGather: return "allgather";
    case UserCollective::ReduceScatter: return "reduce_scatter";
    case UserCollective::Reduce: return "reduce";
    case UserCollective::SparseAllReduce: return "sparse_allreduce";
    case UserCollective::SparseMachineSteps: return "sparse_machine_steps";
    case UserCollective::Barrier: return "barrier";
  }
  return "unknown collective";
}

CallSignature make_signature(const CallInfo& call, uint64_t count, DataType type, ReduceOp op,
                             uint64_t call_number) {
  CallSignature s;
  s.magic = CallSignature::kMagic;
  s.collective = static_cast<uint8_t>(call.collective);
  s.type = static_cast<uint8_t>(call.type.value_or(type));
  s.op = static_cast<uint8_t>(op);
  s.root = call.root;
  s.call = static_cast<uint32_t>(call_number);
  s.count = call.count.value_or(count);
  s.layout = call.layout;
  return s;
}

uint64_t layout_digest(const uint64_t* counts, size_t ranks) {
  uint64_t h = 0xcbf29ce484222325ULL;  // FNV-1a over the counts' bytes
  for (size_t r = 0; r < ranks; ++r) {
    for (int b = 0; b < 8; ++b) {
      h ^= (counts[r] >> (8 * b)) & 0xff;
      h *= 0x100000001b3ULL;
    }
  }
  return h == 0 ? 1 : h;
}

bool read_signature(const void* message, size_t length, CallSignature* out) {
  if (length < sizeof(CallSignature)) return false;
  std::memcpy(out, message, sizeof *out);  // (a UCX buffer need not be aligned)
  return out->magic == CallSignature::kMagic;
}

namespace {
// Names of values that may come from a peer: any byte.
std::string collective_name(uint8_t value) {
  return value <= static_cast<uint8_t>(UserCollective::Barrier)
             ? std::string(to_string(static_cast<UserCollective>(value)))
             : fmt::format("collective #{}", value);
}
std::string type_name(uint8_t value) {
  return value <= static_cast<uint8_t>(DataType::UInt8) ? std::string(to_string(static_cast<DataType>(value)))
                                                        : fmt::format("type #{}", value);
}
std::string op_name(uint8_t value) {
  return value <= static_cast<uint8_t>(ReduceOp::Avg) ? std::string(to_string(static_cast<ReduceOp>(value)))
                                                      : fmt::format("op #{}", value);
}
bool reduces(uint8_t collective) {
  const auto c = static_cast<UserCollective>(collective);
  return c == UserCollective::AllReduce || c == UserCollective::ReduceScatter || c == UserCollective::Reduce;
}
}  // namespace

std::string describe(const CallSignature& s, bool show_op) {
  std::string text = collective_name(s.collective);
  if (s.root >= 0) text += fmt::format(" (root {})", s.root);
  if (show_op || reduces(s.collective)) text += " " + op_name(s.op);
  text += fmt::format(" of {} {}", s.count, type_name(s.type));
  if (s.layout != 0) text += fmt::format(" in per-rank counts {:016x}", s.layout);
  return text + fmt::format(", call {}", s.call);
}

std::string describe_mismatch(const CallSignature& theirs, const std::string& sender, const CallSignature& mine,
                              const std::string& receiver) {
  // The op is named wherever it differs, even for collectives whose op is an implementation
  // detail, so that the two descriptions never read the same.
  const bool show_op = theirs.op != mine.op;
  return fmt::format(
      "{} called {}; {} called {} (do all ranks pass the same count, type, op and root, and call the "
      "same collectives in the same order?)",
      sender, describe(theirs, show_op), receiver, describe(mine, show_op));
}

bool check_calls_from_env(std::string* error) {
  const char* value = std::getenv("FLEXPLAN_CHECK_CALLS");
  if (value == nullptr) return true;
  const std::string_view v(value);
  if (v == "on" || v == "1") return true;
  if (v == "off" || v == "0") return false;
  *error = fmt::format("FLEXPLAN_CHECK_CALLS='{}' is not on, off, 1 or 0", v);
  return true;
}

}  // namespace flexplan
