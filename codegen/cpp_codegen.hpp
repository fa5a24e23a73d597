// Generated per-rank C++: each rank's point-to-point program (lower_rank_program) as straight-line
// code against the runtime's execution interface (codegen/program_abi.h), one line per task,
// to be built into a shared library that the runtime loads instead of lowering the plan itself.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "codegen/program_abi.h"
#include "codegen/rank_program.hpp"
#include "ir/plan.hpp"

namespace flexplan::codegen {

struct GeneratedFile {
  std::string name;  // relative to the output folder
  std::string text;
};

// flexplan_program.h (the interface), plan.cpp (hash, sizes, dispatch on the rank), one
// rank_<r>.cpp per rank, and a CMakeLists.txt building libflexplan_plan.so. `plan` holds whole
// schedules (ir::materialize); `plan_hash` is the fingerprint the runtime computes of the plan
// as it loads it (ir::plan_fingerprint of the file's plan, pipelines compact), which a
// materialized copy need not share: by default ir::plan_fingerprint(plan).
std::vector<GeneratedFile> generate_cpp(const ir::Plan& plan, std::optional<uint64_t> plan_hash = std::nullopt);

// The text of codegen/program_abi.h, as built into this program.
extern const char* const kProgramAbiHeader;

// Rebuilds a RankProgram from what generated code emits through the C interface, checking the
// order of the calls and the ranges; used by the runtime to load generated code and by tests to
// compare it with the lowering.
class ProgramCollector {
 public:
  ProgramCollector(size_t steps, uint64_t units);
  ProgramCollector(const ProgramCollector&) = delete;
  ProgramCollector& operator=(const ProgramCollector&) = delete;
  const flexplan_program_sink* sink() const { return &sink_; }
  // "" or what was wrong with the calls.
  const std::string& error() const { return error_; }
  RankProgram take() { return std::move(program_); }

 private:
  void fail(const std::string& what);
  flexplan_program_sink sink_;
  RankProgram program_;
  uint64_t units_;
  int64_t current_ = -1;
  bool at_end_ = false;
  std::string error_;
};

}  // namespace flexplan::codegen
