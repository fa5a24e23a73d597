// The -a/--algorithms option shared by the commands that take it: its check (names from the
// algorithm table, "name@slices" for a pipelined variant) and its help text.
#pragma once

#include <stdexcept>
#include <string>

#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include "planner/algorithm_table.hpp"
#include "planner/collective_planner.hpp"

namespace flexplan::cli {

inline CLI::Validator algorithm_validator() {
  return CLI::Validator(
      [](std::string& name) -> std::string {
        try {
          find_algorithm(name);
          return {};
        } catch (const std::invalid_argument& e) {
          // Or an algorithm of another collective (collective_planner.hpp).
          for (size_t c = 1; c < ir::kCollectiveCount; ++c) {
            try {
              plan_collective_algorithm_name_check(static_cast<ir::Collective>(c), name);
              return {};
            } catch (const std::invalid_argument&) {
            }
          }
          return e.what();
        }
      },
      "ALGORITHM");
}

// Whether `name` names an algorithm of any collective (as the validator accepts it).
inline bool is_algorithm_name(std::string name) { return algorithm_validator()(name).empty(); }

// "flexreduce: FlexReduce as the paper ...\n..." for --help.
inline std::string algorithm_help(const std::string& lead) {
  std::string text = lead;
  for (const auto& row : algorithm_table())
    text += fmt::format("\n  {:<15} {}{}", row.name, row.summary, row.pipelines ? " (@slices)" : "");
  text += "\nother collectives (all-gather and reduce-scatter; broadcast and reduce):";
  for (const auto& row : collective_table())
    text += fmt::format("\n  {:<15} {}: {}{}", row.name,
                        row.sharded ? "allgather, reduce_scatter" : "broadcast, reduce",
                        row.summary, row.max_slices > 1 ? " (@slices)" : "");
  return text;
}

}  // namespace flexplan::cli
