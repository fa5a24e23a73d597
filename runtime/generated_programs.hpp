// Generated per-rank programs (`flexplan codegen --target cpp`, built into a shared library),
// loaded instead of lowering the plan at creation. The library must have been generated for this
// very plan: its embedded plan hash, interface version, world size and step counts are checked.
#pragma once

#include <cstdint>
#include <string>

#include "codegen/program_abi.h"
#include "codegen/rank_program.hpp"
#include "ir/plan.hpp"

namespace flexplan {

class GeneratedPrograms {
 public:
  // dlopens `path` and checks it against `plan`. Throws RuntimeError naming the library and
  // what does not match (e.g. a library generated for another plan).
  GeneratedPrograms(const std::string& path, const ir::Plan& plan);
  ~GeneratedPrograms();
  GeneratedPrograms(const GeneratedPrograms&) = delete;
  GeneratedPrograms& operator=(const GeneratedPrograms&) = delete;

  // Rank `rank`'s program for the plan's schedule `schedule`, as the library emits it. Throws
  // RuntimeError when the library refuses or emits something malformed.
  codegen::RankProgram program(size_t schedule, int32_t rank) const;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  const ir::Plan& plan_;
  void* handle_ = nullptr;
  const flexplan_generated_plan* entry_ = nullptr;
};

}  // namespace flexplan
