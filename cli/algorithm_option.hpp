// The -a/--algorithms option shared by the commands that take it: its check (names from the
// algorithm table, "name@slices" for a pipelined variant) and its help text.
#pragma once

#include <stdexcept>
#include <string>

#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include "planner/algorithm_table.hpp"

namespace flexplan::cli {

inline CLI::Validator algorithm_validator() {
  return CLI::Validator(
      [](std::string& name) -> std::string {
        try {
          find_algorithm(name);
          return {};
        } catch (const std::invalid_argument& e) {
          return e.what();
        }
      },
      "ALGORITHM");
}

// "flexreduce: FlexReduce as the paper ...\n..." for --help.
inline std::string algorithm_help(const std::string& lead) {
  std::string text = lead;
  for (const auto& row : algorithm_table())
    text += fmt::format("\n  {:<15} {}{}", row.name, row.summary, row.pipelines ? " (@slices)" : "");
  return text;
}

}  // namespace flexplan::cli
