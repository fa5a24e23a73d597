#include "runtime/plan_fingerprint.hpp"

#include <string_view>

namespace flexplan {
namespace {

// FNV-1a over a canonical sequence of the plan's fields: every number as 8 bytes, every
// string and list preceded by its length so that field boundaries cannot shift.
class Fnv1a {
 public:
  void number(uint64_t value) {
    for (int i = 0; i < 8; ++i) byte(static_cast<uint8_t>(value >> (8 * i)));
  }
  void text(std::string_view s) {
    number(s.size());
    for (char c : s) byte(static_cast<uint8_t>(c));
  }
  uint64_t value() const { return hash_; }

 private:
  void byte(uint8_t b) {
    hash_ ^= b;
    hash_ *= 0x100000001b3ull;
  }
  uint64_t hash_ = 0xcbf29ce484222325ull;
};

}  // namespace

uint64_t plan_fingerprint(const ir::Plan& plan) {
  Fnv1a h;
  h.number(static_cast<uint64_t>(plan.world_size));
  h.text(plan.topology_name);
  h.text(plan.topology_hash);
  h.number(plan.rank_names.size());
  for (const auto& name : plan.rank_names) h.text(name);
  h.number(plan.schedules.size());
  for (const auto& schedule : plan.schedules) {
    h.text(schedule.algorithm);
    h.number(static_cast<uint64_t>(schedule.collective));
    h.number(schedule.min_bytes);
    h.number(schedule.max_bytes ? 1 : 0);
    h.number(schedule.max_bytes.value_or(0));
    h.number(schedule.units);
    h.number(schedule.steps.size());
    for (const auto& step : schedule.steps) {
      h.number(static_cast<uint64_t>(step.phase));
      h.number(static_cast<uint64_t>(step.level));
      h.number(step.ops.size());
      for (const auto& op : step.ops) {
        h.number(static_cast<uint64_t>(op.kind));
        h.number(op.begin);
        h.number(op.end);
        h.number(static_cast<uint64_t>(op.root));
        h.number(op.group.size());
        for (int32_t member : op.group) h.number(static_cast<uint64_t>(member));
      }
    }
  }
  return h.value();
}

}  // namespace flexplan
