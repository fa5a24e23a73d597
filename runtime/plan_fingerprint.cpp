#include "runtime/plan_fingerprint.hpp"

#include "ir/byte_io.hpp"
#include "ir/plan_binary.hpp"

namespace flexplan {

// plan.bin's encoding is canonical (equal plans encode to equal bytes) and covers every field,
// so its FNV-1a is the fingerprint; no second walk over the plan to keep in step with the IR.
uint64_t plan_fingerprint(const ir::Plan& plan) {
  return ir::detail::fnv1a64(ir::encode_plan(plan));
}

}  // namespace flexplan
