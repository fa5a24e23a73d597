// libFuzzer harness for the plan.bin decoder. The input's first byte picks the mode: odd, the
// rest is decoded as it is (header checks, checksum); even, the rest gets a correct payload
// length and checksum first, so that the fuzzer explores the payload's decoding behind them.
// The corpus (fuzz/corpus/plan_binary) holds plans written by flexplan behind a mode byte of 0,
// so that mutations of their payloads get past the checksum.
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "fuzz/plan_checks.hpp"
#include "ir/byte_io.hpp"

namespace {

constexpr size_t kHeaderSize = 60, kLengthAt = 44, kChecksumAt = 52;

void put_le(std::vector<uint8_t>& bytes, size_t at, uint64_t value) {
  for (int i = 0; i < 8; ++i) bytes[at + i] = static_cast<uint8_t>(value >> (8 * i));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::vector<uint8_t> bytes(data + 1, data + size);
  if (data[0] % 2 == 0 && bytes.size() >= kHeaderSize) {
    put_le(bytes, kLengthAt, bytes.size() - kHeaderSize);
    const std::span<const uint8_t> all(bytes);
    put_le(bytes, kChecksumAt,
           flexplan::ir::detail::fnv1a64(all.subspan(kHeaderSize),
                                         flexplan::ir::detail::fnv1a64(all.first(kChecksumAt))));
  }
  flexplan::ir::Plan plan;
  try {
    plan = flexplan::ir::decode_plan_unverified(bytes, "fuzz.bin");
  } catch (const flexplan::ir::PlanFormatError&) {
    return 0;
  }
  flexplan::fuzz::check_decoded_plan(plan);
  return 0;
}
