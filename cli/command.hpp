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

// Exit codes shared by every command (README, "The commands").
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailed = 1;    // a check that fails: a plan that fails verification,
                                         // probe --compare finding a link off
inline constexpr int kExitBadInput = 2;  // malformed or unsuitable input: topology, plan file,
                                         // arguments (a forced algorithm that does not suit the tree)
inline constexpr int kExitRefused = 3;   // refused: the target cannot express a sound plan at all
                                         // (an MSCCL schedule no variant fits, docs/codegen.md), or
                                         // a plan too large to expand whole
inline constexpr int kExitInternal = 4;  // could not finish: out of memory, or a bug

// Commands report a non-exception failure by setting this.
int& exit_status();

}  // namespace flexplan::cli
