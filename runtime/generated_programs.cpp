// Loading generated per-rank programs from a shared library (generated_programs.hpp).
#include "runtime/generated_programs.hpp"

#include <dlfcn.h>

#include <fmt/format.h>

#include "codegen/cpp_codegen.hpp"
#include "ir/pipeline_form.hpp"
#include "ir/plan_binary.hpp"
#include "runtime/errors.hpp"

namespace flexplan {

GeneratedPrograms::GeneratedPrograms(const std::string& path, const ir::Plan& plan) : path_(path), plan_(plan) {
  const auto refuse = [&](const std::string& why) {
    if (handle_) dlclose(handle_);
    handle_ = nullptr;
    throw RuntimeError(fmt::format("generated program library '{}': {}", path, why));
  };
  // RTLD_LOCAL: two libraries (two plans) can be loaded side by side.
  handle_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle_) {
    const char* error = dlerror();
    refuse(error ? error : "cannot be loaded");
  }
  using Entry = const flexplan_generated_plan* (*)();
  const auto entry = reinterpret_cast<Entry>(dlsym(handle_, "flexplan_generated_plan_v1"));
  if (!entry) refuse("no flexplan_generated_plan_v1: not built from `flexplan codegen --target cpp`");
  entry_ = entry();
  if (!entry_ || entry_->abi != FLEXPLAN_PROGRAM_ABI)
    refuse(fmt::format("execution interface version {}, this runtime speaks {}", entry_ ? entry_->abi : 0,
                       FLEXPLAN_PROGRAM_ABI));
  // The encoder's fingerprint, as codegen embedded it (not the one from the file's bytes, which
  // may code the same plan otherwise).
  const uint64_t hash = ir::plan_fingerprint(plan);
  if (entry_->plan_hash != hash)
    refuse(fmt::format("generated for another plan (plan hash {:016x}; this plan's is {:016x}): regenerate it "
                       "with `flexplan codegen PLAN --target cpp`",
                       entry_->plan_hash, hash));
  // The hash covers these; checked anyway so that a forged or stale header cannot index past them.
  if (entry_->world_size != plan.world_size || entry_->schedules != plan.schedules.size())
    refuse("its world size or schedule count is not the plan's");
  for (size_t s = 0; s < plan.schedules.size(); ++s)
    if (entry_->schedule_steps[s] != ir::expanded_step_count(plan.schedules[s], plan.schedules[s].slices))
      refuse(fmt::format("schedule {} differs", s));
}

GeneratedPrograms::~GeneratedPrograms() {
  if (handle_) dlclose(handle_);
}

codegen::RankProgram GeneratedPrograms::program(size_t schedule, int32_t rank) const {
  const ir::Schedule& s = plan_.schedules.at(schedule);
  codegen::ProgramCollector collector(ir::expanded_step_count(s, s.slices), ir::expanded_units(s));
  if (entry_->emit(rank, static_cast<uint32_t>(schedule), collector.sink()) != 0)
    throw RuntimeError(fmt::format("generated program library '{}' has no program for rank {} of schedule {}",
                                   path_, rank, schedule));
  if (!collector.error().empty())
    throw RuntimeError(fmt::format("generated program library '{}', rank {} schedule {}: {}", path_, rank,
                                   schedule, collector.error()));
  return collector.take();
}

}  // namespace flexplan
