// A brute-force reference for the verifier, for tests and fuzzing: the IR's semantics
// (docs/ir.md) run exactly on small schedules, unit by unit, with multisets of contributions.
#pragma once

#include <algorithm>
#include <cstdint>
#include <tuple>
#include <vector>

#include "ir/plan.hpp"

namespace flexplan::ir::testing {

// Straightforward semantics: per rank and unit, how many times each rank's contribution is
// held (saturating far above anything a small schedule reaches exactly). Accepts iff no two ops
// of a step write one (rank, unit) and every rank ends with every contribution exactly once.
inline bool reference_accepts(const Schedule& schedule, int32_t p) {
  const size_t units = schedule.units;
  using Multiset = std::vector<int>;  // multiplicity per contributor
  std::vector<std::vector<Multiset>> state(p, std::vector<Multiset>(units, Multiset(p, 0)));
  for (int32_t r = 0; r < p; ++r) {
    for (size_t u = 0; u < units; ++u) state[r][u][r] = 1;
  }
  for (const Step& step : schedule.steps) {
    std::vector<std::vector<int>> written(p, std::vector<int>(units, 0));
    std::vector<std::tuple<int32_t, size_t, Multiset>> writes;
    for (const Op& op : step.ops) {
      for (size_t u = op.begin; u < op.end; ++u) {
        if (op.kind == OpKind::Reduce) {
          Multiset sum(p, 0);
          for (int32_t m : op.group) {
            for (int32_t c = 0; c < p; ++c) sum[c] += state[m][u][c];
          }
          for (int& count : sum) count = std::min(count, 1 << 20);
          writes.emplace_back(op.root, u, sum);
        } else {
          for (int32_t m : op.group) {
            if (m != op.root) writes.emplace_back(m, u, state[op.root][u]);
          }
        }
      }
    }
    for (auto& [rank, u, value] : writes) {
      if (written[rank][u]++) return false;
      state[rank][u] = value;
    }
  }
  for (int32_t r = 0; r < p; ++r) {
    for (size_t u = 0; u < units; ++u) {
      for (int32_t c = 0; c < p; ++c) {
        if (state[r][u][c] != 1) return false;
      }
    }
  }
  return true;
}

}  // namespace flexplan::ir::testing
