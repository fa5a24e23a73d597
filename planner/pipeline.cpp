// Slicing a schedule into a pipeline (pipeline.hpp).
#include "planner/pipeline.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>

#include <fmt/core.h>

namespace flexplan {

ir::Schedule pipeline_slices(const ir::Schedule& schedule, uint32_t slices) {
  if (slices == 0) throw std::invalid_argument("pipeline: zero slices");
  if (schedule.units > std::numeric_limits<uint64_t>::max() / slices)
    throw std::invalid_argument(fmt::format("pipeline: {} units times {} slices overflow 64 bits",
                                            schedule.units, slices));
  ir::Schedule piped;
  piped.algorithm = slices == 1 ? schedule.algorithm
                                : fmt::format("{}@{}", schedule.algorithm, slices);
  piped.collective = schedule.collective;
  piped.min_bytes = schedule.min_bytes;
  piped.max_bytes = schedule.max_bytes;
  piped.units = schedule.units * slices;
  const size_t m = schedule.steps.size();
  if (m == 0) return piped;
  piped.steps.resize(m + slices - 1);
  for (size_t t = 0; t < piped.steps.size(); ++t) {
    ir::Step& step = piped.steps[t];
    // Slices j with 0 <= t - j < m; the step is labelled by the frontmost slice's step.
    const size_t first_slice = t + 1 > m ? t + 1 - m : 0;
    const size_t last_slice = std::min<size_t>(t, slices - 1);
    step.phase = schedule.steps[t - first_slice].phase;
    step.level = schedule.steps[t - first_slice].level;
    for (size_t j = first_slice; j <= last_slice; ++j) {
      const uint64_t offset = j * schedule.units;
      for (const ir::Op& op : schedule.steps[t - j].ops) {
        ir::Op& copy = step.ops.emplace_back(op);
        copy.begin += offset;
        copy.end += offset;
      }
    }
  }
  return piped;
}

}  // namespace flexplan
