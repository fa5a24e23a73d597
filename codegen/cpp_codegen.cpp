// Generated per-rank C++ (cpp_codegen.hpp): each rank's program as one call per task.
#include "codegen/cpp_codegen.hpp"

#include <fmt/format.h>

#include "flexplan/version.hpp"
#include "ir/collective_contract.hpp"
#include "ir/plan_binary.hpp"

namespace flexplan::codegen {
namespace {

std::string range_text(uint64_t begin, uint64_t end) { return fmt::format("[{},{})", begin, end); }

// "4 (#7)", or "4 (#7.1)" in a star reduce that shares the chunk field with its sources' places.
std::string links_text(const std::vector<Link>& links, bool places) {
  std::string out;
  for (const Link& link : links)
    out += fmt::format("{}{} (#{}", out.empty() ? "" : ", ", link.rank, link.message) +
           (places ? fmt::format(".{})", link.source) : ")");
  return out;
}

// "step 2 op 1: reduce [0,6) root 3: receive #4 from 4, add own, write (staged)"
std::string describe(const ir::Schedule& schedule, size_t step, const Task& task) {
  const ir::Op& op = schedule.steps[step].ops[task.op_index];
  const bool places = task.max_chunks != kMaxChunksPerRange;
  std::string what;
  if (!task.receives()) {
    what = fmt::format("send own{} to {}", task.own_from_send ? " (input)" : "",
                       links_text(task.destinations, places));
  } else {
    what = fmt::format("receive from {}", links_text(task.sources, places));
    if (task.reduce && task.add_own) what += task.own_from_send ? ", add own (input)" : ", add own";
    if (task.writes()) what += task.stage_writes ? ", write (staged)" : ", write";
    if (task.sends()) what += fmt::format(", send to {}", links_text(task.destinations, places));
  }
  return fmt::format("step {} op {}: {} {} root {}: {}", step, task.op_index, ir::to_string(op.kind),
                     range_text(op.begin, op.end), op.root, what);
}

std::string flags(const Task& task) {
  std::vector<std::string> set;
  if (task.add_own) set.push_back("kAddOwn");
  if (task.stage_writes) set.push_back("kStaged");
  if (task.own_from_send) set.push_back("kOwnFromSend");
  if (set.empty()) return "0";
  std::string out = set[0];
  for (size_t i = 1; i < set.size(); ++i) out += " | " + set[i];
  return out;
}

std::string peer(const std::vector<Link>& links) { return links.empty() ? "kNone" : std::to_string(links[0].rank); }
std::string initializer(const std::vector<Link>& links) {
  std::string out = "{";
  for (const Link& link : links)
    out += fmt::format("{}{{{}, {}, {}}}", out.size() > 1 ? ", " : "", link.rank, link.message, link.source);
  return out + "}";
}

// Whether every link of the task names the same message with no source place (a chain's).
bool one_message(const Task& task) {
  std::vector<Link> links = task.sources;
  links.insert(links.end(), task.destinations.begin(), task.destinations.end());
  for (const Link& link : links)
    if (link.source != 0 || link.message != links[0].message) return false;
  return true;
}

// One call per task: a chain member's compact form (Emitter::reduce / broadcast), which implies
// own_position and names both messages by the op's number, else the general one of a star's
// root or a star reduce's member.
std::string task_call(const Task& task) {
  const bool chain = task.sources.size() <= 1 && task.destinations.size() <= 1 &&
                     task.own_position == (task.add_own ? 1u : 0u) && task.max_chunks == kMaxChunksPerRange &&
                     one_message(task);
  if (chain) {
    const uint64_t message = task.receives() ? task.sources[0].message
                             : task.sends()  ? task.destinations[0].message
                                             : 0;
    return fmt::format("e.{}({}, {}, {}, {}, {}, {}, {});", task.reduce ? "reduce" : "broadcast", task.op_index,
                       task.unit_begin, task.unit_end, peer(task.sources), peer(task.destinations), flags(task),
                       message);
  }
  if (task.reduce)
    return fmt::format("e.reduce_star({}, {}, {}, {}, {}, {}, {}, {});", task.op_index, task.unit_begin,
                       task.unit_end, flags(task), task.own_position, task.max_chunks, initializer(task.sources),
                       initializer(task.destinations));
  return fmt::format("e.broadcast_star({}, {}, {}, {}, {}, {});", task.op_index, task.unit_begin, task.unit_end,
                     flags(task), initializer(task.sources), initializer(task.destinations));
}

std::string schedule_title(const ir::Schedule& schedule, size_t index) {
  return fmt::format("schedule {}: {} {}, bytes [{}, {}), {} units", index, schedule.algorithm,
                     ir::describe_contract(schedule), schedule.min_bytes,
                     schedule.max_bytes ? std::to_string(*schedule.max_bytes) : "inf", schedule.units);
}

std::string rank_file(const ir::Plan& plan, int32_t rank, const std::string& header_line) {
  const std::string name = static_cast<size_t>(rank) < plan.rank_names.size() ? plan.rank_names[rank] : "";
  std::string out = fmt::format("// Rank {}{} of {}\n", rank, name.empty() ? "" : " (" + name + ")", header_line);
  out += "#include \"flexplan_program.h\"\n\nusing namespace flexplan_generated;\n\nnamespace {\n";
  for (size_t index = 0; index < plan.schedules.size(); ++index) {
    const ir::Schedule& schedule = plan.schedules[index];
    const RankProgram program = lower_rank_program(schedule, rank);
    out += fmt::format("\n// {}\nvoid schedule_{}(const Emitter& e) {{\n", schedule_title(schedule, index), index);
    for (size_t s = 0; s < program.steps.size(); ++s) {
      const StepProgram& step = program.steps[s];
      if (step.tasks.empty() && step.copy_in.empty()) continue;
      out += fmt::format("  e.step({});  // {}, level {}\n", s, ir::to_string(schedule.steps[s].phase),
                         schedule.steps[s].level);
      for (const UnitRange& r : step.copy_in)
        out += fmt::format("  e.copy_in({}, {});  // step {}: input {} into the result first\n", r.begin, r.end, s,
                           range_text(r.begin, r.end));
      for (const Task& task : step.tasks)
        out += fmt::format("  {}  // {}\n", task_call(task), describe(schedule, s, task));
    }
    for (const UnitRange& r : program.copy_at_end)
      out += fmt::format("  e.copy_at_end({}, {});  // no step writes {} here: the input is the result\n", r.begin,
                         r.end, range_text(r.begin, r.end));
    out += "}\n";
  }
  out += "\n}  // namespace\n\n";
  out += fmt::format("void flexplan_rank_{}(const Emitter& e, uint32_t schedule) {{\n  switch (schedule) {{\n", rank);
  for (size_t index = 0; index < plan.schedules.size(); ++index)
    out += fmt::format("    case {}: schedule_{}(e); break;\n", index, index);
  out += "  }\n}\n";
  return out;
}

}  // namespace

std::vector<GeneratedFile> generate_cpp(const ir::Plan& plan, std::optional<uint64_t> plan_hash) {
  const uint64_t hash = plan_hash ? *plan_hash : ir::plan_fingerprint(plan);
  const std::string header_line = fmt::format(
      "plan {} (topology hash {}, plan hash {:016x}), generated by flexplan {}.\n"
      "// Do not edit: regenerate with `flexplan codegen PLAN --target cpp -o DIR`.",
      plan.topology_name.empty() ? "-" : plan.topology_name,
      plan.topology_hash.empty() ? "-" : plan.topology_hash, hash, kVersion);
  std::vector<GeneratedFile> files;
  files.push_back({"flexplan_program.h", kProgramAbiHeader});
  std::string main = fmt::format("// The per-rank programs of {}\n", header_line);
  main += "#include \"flexplan_program.h\"\n\nusing flexplan_generated::Emitter;\n\n";
  for (int32_t r = 0; r < plan.world_size; ++r)
    main += fmt::format("void flexplan_rank_{}(const Emitter& e, uint32_t schedule);\n", r);
  main += "\nnamespace {\n\nconst uint32_t kScheduleSteps[] = {";
  for (size_t i = 0; i < plan.schedules.size(); ++i)
    main += fmt::format("{}{}", i ? ", " : "", plan.schedules[i].steps.size());
  if (plan.schedules.empty()) main += "0";
  main += "};\n\nint emit(int32_t rank, uint32_t schedule, const flexplan_program_sink* sink) {\n";
  main += fmt::format("  if (schedule >= {}) return -1;\n  const Emitter e{{sink}};\n  switch (rank) {{\n",
                      plan.schedules.size());
  for (int32_t r = 0; r < plan.world_size; ++r)
    main += fmt::format("    case {}: flexplan_rank_{}(e, schedule); return 0;\n", r, r);
  main += "    default: return -1;\n  }\n}\n\n";
  main += fmt::format(
      "const flexplan_generated_plan kPlan{{FLEXPLAN_PROGRAM_ABI, 0x{:016x}ULL, {}, {}, kScheduleSteps, emit}};\n\n"
      "}}  // namespace\n\n"
      "extern \"C\" const flexplan_generated_plan* flexplan_generated_plan_v1(void) {{ return &kPlan; }}\n",
      hash, plan.world_size, plan.schedules.size());
  files.push_back({"plan.cpp", main});
  for (int32_t r = 0; r < plan.world_size; ++r)
    files.push_back({fmt::format("rank_{}.cpp", r), rank_file(plan, r, header_line)});
  files.push_back({"CMakeLists.txt",
                   "# Builds the generated per-rank programs into libflexplan_plan.so, which the runtime loads\n"
                   "# (FLEXPLAN_PROGRAM_LIBRARY or Options::program_library; docs/codegen.md).\n"
                   "#   cmake -S . -B build -DCMAKE_BUILD_TYPE=Release && cmake --build build\n"
                   "cmake_minimum_required(VERSION 3.20)\n"
                   "project(flexplan_plan LANGUAGES CXX)\n"
                   "set(CMAKE_CXX_STANDARD 17)\n"
                   "file(GLOB sources CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*.cpp)\n"
                   "add_library(flexplan_plan SHARED ${sources})\n"
                   "set_target_properties(flexplan_plan PROPERTIES CXX_VISIBILITY_PRESET hidden)\n"});
  return files;
}

ProgramCollector::ProgramCollector(size_t steps, uint64_t units) : units_(units) {
  program_.steps.resize(steps);
  sink_.context = this;
  sink_.step = [](void* self, uint32_t step) {
    auto& c = *static_cast<ProgramCollector*>(self);
    if (c.at_end_ || static_cast<int64_t>(step) <= c.current_ || step >= c.program_.steps.size())
      return c.fail(fmt::format("step {} out of order or beyond the schedule's {} steps", step, c.program_.steps.size()));
    c.current_ = step;
  };
  sink_.task = [](void* self, const flexplan_task* t) {
    auto& c = *static_cast<ProgramCollector*>(self);
    if (c.current_ < 0 || c.at_end_) return c.fail("a task outside a step");
    if (t->unit_begin >= t->unit_end || t->unit_end > c.units_)
      return c.fail(fmt::format("task range [{},{}) outside [0,{})", t->unit_begin, t->unit_end, c.units_));
    if ((t->source_count > 0 && t->sources == nullptr) || (t->destination_count > 0 && t->destinations == nullptr))
      return c.fail("a task's sources or destinations missing");
    if (t->own_position > t->source_count)
      return c.fail(fmt::format("own data placed after source {} of {}", t->own_position, t->source_count));
    Task task;
    task.op_index = t->op_index;
    task.reduce = t->reduce != 0;
    task.add_own = t->add_own != 0;
    task.own_position = t->own_position;
    task.stage_writes = t->stage_writes != 0;
    task.own_from_send = t->own_from_send != 0;
    // A power of two that leaves every source's place room in the tag's chunk field.
    if (t->max_chunks == 0 || t->max_chunks > kMaxChunksPerRange || (t->max_chunks & (t->max_chunks - 1)) != 0)
      return c.fail(fmt::format("a task's chunk limit {} is not a power of two up to {}", t->max_chunks,
                                kMaxChunksPerRange));
    task.max_chunks = t->max_chunks;
    const auto link = [&](const flexplan_link& l) -> std::optional<Link> {
      if (l.source >= kMaxChunksPerRange / t->max_chunks) return std::nullopt;
      return Link{l.rank, l.message, l.source};
    };
    for (uint32_t i = 0; i < t->source_count; ++i) {
      const auto l = link(t->sources[i]);
      if (!l) return c.fail(fmt::format("a source's place {} beyond its task's chunk limit", t->sources[i].source));
      task.sources.push_back(*l);
    }
    for (uint32_t i = 0; i < t->destination_count; ++i) {
      const auto l = link(t->destinations[i]);
      if (!l)
        return c.fail(
            fmt::format("a destination's place {} beyond its task's chunk limit", t->destinations[i].source));
      task.destinations.push_back(*l);
    }
    task.unit_begin = t->unit_begin;
    task.unit_end = t->unit_end;
    c.program_.steps[static_cast<size_t>(c.current_)].tasks.push_back(std::move(task));
  };
  sink_.copy_in = [](void* self, uint64_t begin, uint64_t end) {
    auto& c = *static_cast<ProgramCollector*>(self);
    if (c.current_ < 0 || c.at_end_ || begin >= end || end > c.units_) return c.fail("copy_in out of place");
    c.program_.steps[static_cast<size_t>(c.current_)].copy_in.push_back({begin, end});
  };
  sink_.copy_at_end = [](void* self, uint64_t begin, uint64_t end) {
    auto& c = *static_cast<ProgramCollector*>(self);
    if (begin >= end || end > c.units_) return c.fail("copy_at_end out of range");
    c.at_end_ = true;
    c.program_.copy_at_end.push_back({begin, end});
  };
}

void ProgramCollector::fail(const std::string& what) {
  if (error_.empty()) error_ = what;
}

}  // namespace flexplan::codegen
