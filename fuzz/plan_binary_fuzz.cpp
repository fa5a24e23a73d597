// libFuzzer harness for the plan.bin decoders: the whole one and a rank's part (plan_slice.hpp).
// The input's first byte picks the mode: odd, the rest is decoded as it is (header checks,
// checksums); even, the rest gets its checksums recomputed first (format 6: the payload
// length and checksum; format 7: every block's and chunk's checksum, the fingerprint and the
// header's checksum), so that the fuzzer explores the decoding behind them. The corpus
// (fuzz/corpus/plan_binary) holds plans written by flexplan behind a mode byte of 0, so that
// mutations of their contents get past the checksums, in both formats; and a few invalid files
// behind a mode byte of 1.
//
// Beyond the whole plan's round trips (plan_checks.hpp): a rank's part never fails as malformed
// where the whole decoder accepted the file, and holds exactly the rank's ops of the whole plan.
#include <cstdint>
#include <cstring>
#include <span>
#include <stdexcept>
#include <vector>

#include "fuzz/plan_checks.hpp"
#include "ir/byte_io.hpp"
#include "ir/plan_sections.hpp"
#include "ir/plan_slice.hpp"

namespace {

constexpr size_t kHeaderSizeV6 = 60, kLengthAt = 44;

void put_le(std::vector<uint8_t>& bytes, size_t at, uint64_t value) {
  for (int i = 0; i < 8; ++i) bytes[at + i] = static_cast<uint8_t>(value >> (8 * i));
}

bool takes_part(const flexplan::ir::Op& op, int32_t rank) {
  bool found = false;
  flexplan::ir::detail::for_each_participant(op, [&](int32_t r, uint64_t) { found |= r == rank; });
  return found;
}

// A few ranks' parts, against the plan the whole decoder read (null when it refused the file).
void check_slices(const std::vector<uint8_t>& bytes, const flexplan::ir::Plan* plan) {
  using namespace flexplan::ir;
  for (int32_t rank : {0, 1, 2, 7}) {
    if (plan && rank >= plan->world_size) break;
    RankSlice slice;
    try {
      slice = read_rank_slice(bytes, "fuzz.bin", rank);
    } catch (const PlanFormatError& e) {
      if (plan && plan_format_version(bytes, "fuzz.bin") == kPlanFormatVersion)
        flexplan::fuzz::fail("a rank's part is malformed where the whole plan was not", e.what());
      continue;
    } catch (const VerifyError&) {
      continue;  // the fields or its ops' structure: verify_plan refuses such a plan too
    } catch (const std::invalid_argument&) {
      continue;  // a rank outside the world
    }
    if (!plan) continue;
    if (slice.schedules.size() != plan->schedules.size()) flexplan::fuzz::fail("a rank's part: schedules");
    for (size_t i = 0; i < plan->schedules.size(); ++i) {
      const SliceSchedule& part = slice.schedules[i];
      if (part.steps_of) continue;
      const auto& steps = plan->schedules[i].steps;
      if (part.steps.size() != steps.size()) flexplan::fuzz::fail("a rank's part: steps");
      for (size_t s = 0; s < steps.size(); ++s) {
        size_t next = 0;
        for (size_t k = 0; k < steps[s].ops.size(); ++k) {
          if (!takes_part(steps[s].ops[k], rank)) continue;
          if (next >= part.steps[s].ops.size() || part.steps[s].ops[next].index != k ||
              !(part.steps[s].ops[next].op == steps[s].ops[k]))
            flexplan::fuzz::fail("a rank's part: its ops differ from the whole plan's");
          ++next;
        }
        if (next != part.steps[s].ops.size()) flexplan::fuzz::fail("a rank's part: ops it does not take part in");
      }
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::vector<uint8_t> bytes(data + 1, data + size);
  if (data[0] % 2 == 0) {
    // Format 6: the payload length as well (format 7's lengths are left to the fuzzer).
    if (bytes.size() >= kHeaderSizeV6 && bytes.size() >= 12 && bytes[8] == 6)
      put_le(bytes, kLengthAt, bytes.size() - kHeaderSizeV6);
    flexplan::ir::detail::reseal_plan(bytes);
  }
  flexplan::ir::Plan plan;
  bool decoded = false;
  try {
    plan = flexplan::ir::decode_plan_unverified(bytes, "fuzz.bin");
    decoded = true;
  } catch (const flexplan::ir::PlanFormatError&) {
  }
  check_slices(bytes, decoded ? &plan : nullptr);
  if (decoded) flexplan::fuzz::check_decoded_plan(plan);
  return 0;
}
