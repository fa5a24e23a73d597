// Each cli/cmd_*.cpp file adds its subcommand (or the main job's options) to the one CLI11 app
// by defining a static Registration; main.cpp runs every registered setup in name order.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace flexplan::cli {

using Setup = void (*)(CLI::App& app);

struct Registration {
  Registration(const char* name, Setup setup);
};

// Exit codes shared by every command.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailed = 1;    // the work ran and found a problem (a plan that fails to verify)
inline constexpr int kExitBadInput = 2;  // malformed input: topology, plan file, arguments
inline constexpr int kExitCannotExport = 3;  // codegen: the target cannot express a schedule (docs/codegen.md)

// Commands report a non-exception failure by setting this.
int& exit_status();

}  // namespace flexplan::cli
