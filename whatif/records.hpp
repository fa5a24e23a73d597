// A sweep's results as text (a readable table per point), JSON and CSV (the same records,
// documented in docs/whatif.md, "Output formats"; the JSON's "version" changes when a field's
// meaning does).
#pragma once

#include <string>

#include "whatif/sweep.hpp"

namespace flexplan::whatif {

// 2: the plan command's race (pipelined variants in by_algorithm), upgrades ranked by time
// saved (or per cost), the advice in upgrade_steps.
inline constexpr int kJsonVersion = 2;

std::string sweep_text(const Sweep&);
std::string sweep_json(const Sweep&);
std::string sweep_csv(const Sweep&);

}  // namespace flexplan::whatif
