// `flexplan codegen PLAN --target cpp|msccl-xml|trace|dot -o OUT`: compiles a verified plan for a
// backend or draws it (docs/codegen.md): per-rank C++ for the runtime, MSCCL algorithm XML (one
// file per all-reduce, all-gather or reduce-scatter schedule, each checked by loading and
// running it on host buffers against its collective's contract before it is written), the
// predicted timeline as Chrome trace JSON, or a Graphviz diagram. Every collective but the
// MSCCL export's refusals (broadcast and reduce) goes through every target. --format json
// prints what was written as one JSON document; notes and refusals stay on stderr.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "cli/arguments.hpp"
#include "cli/command.hpp"
#include "codegen/cpp_codegen.hpp"
#include "codegen/msccl.hpp"
#include "codegen/pictures.hpp"
#include "ir/collective_contract.hpp"
#include "ir/pipeline_form.hpp"
#include "ir/plan_binary.hpp"
#include "ir/plan_load.hpp"
#include "planner/size_format.hpp"
#include "topology/topology.hpp"

namespace flexplan::cli {
namespace {

struct CodegenCommand {
  std::string plan_path;
  std::string target;
  std::string out;
  // msccl-xml
  bool rccl = false;
  uint64_t chunks = 0;
  std::string protocol = "Simple";
  int max_steps = 64;
  int max_threadblocks = 64;
  int max_channels = 32;
  // trace and dot
  std::string topology_path;
  std::string bytes = "1M";  // -b/--minbytes
  std::string old_bytes;     // the older --bytes
  int schedule = -1;
  std::string collective;  // trace: which collective's schedule -b picks ("": see pick_schedule)
  int32_t root = 0;
  std::string hop_overhead = "0 s";
  std::string format = "text";
};

// What the command wrote, for --format json ("flexplan-codegen", docs/codegen.md).
struct Written {
  bool json = false;
  nlohmann::json files = nlohmann::json::array();
  nlohmann::json refused = nlohmann::json::array();
  nlohmann::json skipped = nlohmann::json::array();  // msccl-xml: broadcast and reduce (no root in the format)
  nlohmann::json extra = nlohmann::json::object();  // target-specific fields (cpp: plan_hash, ...)
};

// Input the user got wrong: say so and exit 2.
struct BadInput : std::runtime_error {
  using std::runtime_error::runtime_error;
};

void write_file(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  out.close();
  if (!out) throw std::runtime_error(fmt::format("cannot write {}", path.string()));
}

size_t pick_schedule(const CodegenCommand& c, const ir::Plan& plan) {
  if (plan.schedules.empty()) throw BadInput("the plan has no schedules");
  if (c.schedule >= 0) {
    if (static_cast<size_t>(c.schedule) >= plan.schedules.size())
      throw BadInput(fmt::format("--schedule {}: the plan has {} schedule(s)", c.schedule, plan.schedules.size()));
    return static_cast<size_t>(c.schedule);
  }
  if (c.target == "dot") return 0;
  const uint64_t bytes = size_argument(c.bytes, "-b/--minbytes");
  // --collective, else the all-reduce, else the collective of the plan's first schedule.
  ir::Collective collective = ir::Collective::AllReduce;
  if (!c.collective.empty()) {
    try {
      collective = ir::collective_from_string(c.collective);
    } catch (const std::invalid_argument& e) {
      throw BadInput(fmt::format("--collective: {}", e.what()));
    }
  } else if (!ir::plans_collective(plan, collective)) {
    collective = plan.schedules[0].collective;
  }
  const int32_t root = ir::has_root(collective) ? c.root : 0;
  const auto found = ir::find_schedule(plan, {collective, bytes, root});
  if (!found) {
    std::string held;
    for (const ir::Schedule& s : plan.schedules) {
      const std::string what = ir::has_root(s.collective)
                                   ? fmt::format("{} (root {})", ir::to_string(s.collective), s.root)
                                   : std::string(ir::to_string(s.collective));
      if (held.find(what) == std::string::npos) held += (held.empty() ? "" : ", ") + what;
    }
    throw BadInput(fmt::format("the plan has no {}{} schedule for {} bytes (it holds {}): pick one with "
                               "--collective and --root, or --schedule",
                               ir::to_string(collective), ir::has_root(collective) ? fmt::format(" root {}", root) : "",
                               bytes, held));
  }
  return *found;
}

// `loaded` is the plan as the file holds it (pipelines compact), `plan` its materialized copy.
void generate_cpp(const CodegenCommand& c, const ir::Plan& loaded, const ir::Plan& plan, Written& written) {
  const std::filesystem::path dir(c.out);
  std::filesystem::create_directories(dir);
  // The runtime checks the library against the fingerprint of the plan it loads, compact: a
  // materialized broadcast or reduce pipeline does not always encode back to the same bytes.
  const uint64_t hash = ir::plan_fingerprint(loaded);
  const auto files = codegen::generate_cpp(plan, hash);
  for (const auto& file : files) write_file(dir / file.name, file.text);
  if (written.json) {
    for (const auto& file : files) written.files.push_back({{"path", (dir / file.name).string()}});
    written.extra = {{"plan_hash", fmt::format("{:016x}", hash)},
                     {"ranks", plan.world_size},
                     {"schedules", plan.schedules.size()}};
    return;
  }
  fmt::print("wrote {} files to {} (plan hash {:016x}, {} ranks, {} schedules)\n", files.size(), dir.string(), hash,
             plan.world_size, plan.schedules.size());
  fmt::print("build: cmake -S {0} -B {0}/build -DCMAKE_BUILD_TYPE=Release && cmake --build {0}/build\n",
             dir.string());
}

// `plan` as the file holds it: export_plan materializes each schedule, or where it exceeds the
// executors' limits a shallower pipeline of it or another schedule of the plan (a note says so).
void export_msccl(const CodegenCommand& c, const ir::Plan& plan, Written& written) {
  codegen::msccl::ExportOptions options;
  options.limits.rccl = c.rccl;
  options.limits.steps_per_threadblock = c.max_steps;
  options.limits.threadblocks_per_gpu = c.max_threadblocks;
  options.limits.channels = c.max_channels;
  options.chunks = c.chunks;
  options.protocol = c.protocol;
  const std::filesystem::path dir(c.out);
  std::filesystem::create_directories(dir);
  // Broadcast and reduce have a root, which the format cannot name: every plan the plan command
  // writes holds them, so they are left out with one note rather than refused, unless the plan
  // holds nothing else.
  std::vector<size_t> rooted;
  for (size_t i = 0; i < plan.schedules.size(); ++i)
    if (ir::has_root(plan.schedules[i].collective)) rooted.push_back(i);
  const bool only_rooted = rooted.size() == plan.schedules.size();
  if (!rooted.empty() && !only_rooted) {
    std::string which;
    for (const size_t i : rooted) {
      const ir::Schedule& s = plan.schedules[i];
      which += fmt::format("{}{} ({} from root {})", which.empty() ? "" : ", ", i, ir::to_string(s.collective), s.root);
      written.skipped.push_back({{"schedule", i}, {"algorithm", s.algorithm},
                                 {"collective", ir::to_string(s.collective)}, {"root", s.root}});
    }
    if (!written.json)
      fmt::print(stderr, "flexplan: note: schedules {} not exported: the MSCCL XML names no root, so the "
                 "executors would run a rooted file for every root; --target cpp runs them\n", which);
  }
  for (const codegen::msccl::ScheduleExport& e : codegen::msccl::export_plan(plan, options)) {
    const size_t i = e.index;
    std::fflush(stdout);  // the notes and refusals on stderr follow the lines before them
    if (!only_rooted && ir::has_root(plan.schedules[i].collective)) continue;  // noted above
    if (!e.fitted) {
      fmt::print(stderr, "flexplan: refused: {}\n", e.refused);
      exit_status() = kExitRefused;
      written.refused.push_back({{"schedule", i}, {"algorithm", plan.schedules[i].algorithm}, {"reason", e.refused}});
      continue;
    }
    const codegen::msccl::FittedExport& fitted = *e.fitted;
    if (e.source != i) {
      fmt::print(stderr, "flexplan: note: schedule {} ({}) exported as schedule {}'s {} over its sizes: no variant of it "
                 "fits: {}\n", i, plan.schedules[i].algorithm, e.source, fitted.algorithm, e.substituted_because);
    } else if (!fitted.why.empty()) {
      std::string deeper;
      for (size_t t = 1; t < fitted.too_deep.size(); ++t) deeper += (t > 1 ? ", " : "") + fitted.too_deep[t];
      fmt::print(stderr, "flexplan: note: schedule {} ({}) exported as {}, the deepest pipeline of it that fits: {}{}\n",
                 i, fitted.planned, fitted.algorithm, fitted.why,
                 deeper.empty() ? "" : fmt::format("; {} do not fit either", deeper));
    }
    const codegen::msccl::Export& exported = fitted.exported;
    const auto& a = exported.algorithm;
    // Every file is read back, loaded under the executors' rules and run before it is kept.
    const std::string xml = codegen::msccl::to_xml(a);
    const auto read = codegen::msccl::parse_xml(xml);
    codegen::msccl::check_loadable(read, options.limits);
    if (const std::string error = codegen::msccl::simulate(read); !error.empty())
      throw std::runtime_error(fmt::format("schedule {} exported wrong (a bug): {}", i, error));
    const std::string name = fmt::format("{}-{}.xml", i, fitted.algorithm);
    write_file(dir / name, xml);
    size_t tbs = 0, steps = 0;
    for (const auto& gpu : a.gpus) {
      tbs = std::max(tbs, gpu.threadblocks.size());
      for (const auto& tb : gpu.threadblocks) steps = std::max(steps, tb.steps.size());
    }
    const auto& r = exported.chunking;
    const bool sharded = r.shard_chunks > 0;
    if (written.json) {
      using nlohmann::json;
      json entry{{"path", (dir / name).string()},
                 {"schedule", i},
                 {"planned", plan.schedules[i].algorithm},
                 {"algorithm", fitted.algorithm},
                 {"source_schedule", e.source},
                 {"note", e.source != i ? json(e.substituted_because) : fitted.why.empty() ? json(nullptr) : json(fitted.why)},
                 {"collective", a.collective},
                 {"min_bytes", a.min_bytes},
                 {"max_bytes", a.max_bytes == 0 ? json(nullptr) : json(a.max_bytes)},
                 {"sharded", sharded},
                 {"rccl", c.rccl},
                 {"chunks", r.chunks},
                 {"exact", r.exact},
                 {"channels", a.channels},
                 {"threadblocks_per_gpu", tbs},
                 {"steps_per_threadblock", steps},
                 {"count_multiple_of", sharded ? r.shard_chunks : r.chunks}};
      if (!r.exact)
        entry["rounding"] = {{"largest_shift_chunks", r.largest_shift},
                             {"worst_rank", r.worst_rank < 0 ? json(nullptr) : json(r.worst_rank)},
                             {"worst_share_ratio", r.worst_rank < 0 ? json(nullptr) : json(r.worst_share_ratio)},
                             {"ranks_losing_share", r.ranks_losing_share.size()},
                             {"ops_dropped", r.ops_dropped}};
      written.files.push_back(std::move(entry));
      continue;
    }
    fmt::print("{}: {}, bytes [{}, {}]{} {}, {} chunks{}, {} channel(s), up to {} threadblocks/gpu and {} "
               "steps/threadblock; checked on host buffers\n",
               (dir / name).string(), a.collective, a.min_bytes, a.max_bytes == 0 ? "inf" : std::to_string(a.max_bytes),
               sharded ? " of the whole vector" : "", c.rccl ? "(RCCL step types)" : "(fused step types)", r.chunks,
               r.exact ? fmt::format(" (exact: {} units)", r.units) : "", a.channels, tbs, steps);
    if (!r.exact) {
      const std::string load =
          r.worst_rank < 0 ? ""
                           : fmt::format("; the most loaded rank {} reduces {:.1f}% of its planned share", r.worst_rank,
                                         100 * r.worst_share_ratio);
      const std::string onto =
          sharded ? fmt::format("shards of {}-{} units onto {} chunks each", r.smallest_shard_units,
                                r.largest_shard_units, r.shard_chunks)
                  : fmt::format("{} units to {} chunks", r.units, r.chunks);
      fmt::print("  rounding: {}, each boundary to the nearest chunk (moved by at most {:.2f} chunk){}{}{}\n", onto,
                 r.largest_shift, load,
                 r.ranks_losing_share.empty() ? "" : fmt::format("; {} rank(s) lose their share entirely",
                                                                  r.ranks_losing_share.size()),
                 r.ops_dropped ? fmt::format("; {} op(s) became empty", r.ops_dropped) : "");
    }
    if (sharded)
      fmt::print("  the executors run it for {} calls whose count per rank ({}) is a multiple of {} (nchunksperloop "
                 "{} counts all {} ranks' data; earlier releases ask for a multiple of {}), in place or not\n",
                 a.collective, a.collective == "allgather" ? "sendcount" : "recvcount", r.shard_chunks, r.chunks,
                 a.world, r.chunks);
    else
      fmt::print("  the executors run it for element counts that are multiples of {} (nchunksperloop)\n", r.chunks);
  }
}

void draw(const CodegenCommand& c, const ir::Plan& plan, Written& written) {
  const size_t index = pick_schedule(c, plan);
  std::string text;
  if (c.target == "trace") {
    if (c.topology_path.empty()) throw BadInput("--target trace needs --topology TOPO.json (the plan's topology)");
    const Topology topo = load_topology(c.topology_path);
    CostParams params;
    const uint64_t bytes = size_argument(c.bytes, "-b/--minbytes");
    try {
      params.hop_overhead = parse_latency(c.hop_overhead);
      params.reduce_bandwidth = topo.reduce_bandwidth();  // priced as the planner priced it
    } catch (const std::invalid_argument& e) {
      throw BadInput(e.what());
    }
    if (plan.topology_hash.empty())
      fmt::print(stderr, "flexplan: warning: the plan names no topology hash; cannot check it is {}'s\n", topo.name());
    try {
      text = codegen::trace_json(plan, index, topo, bytes, params);
    } catch (const std::invalid_argument& e) {
      throw BadInput(e.what());
    }
  } else {
    text = codegen::dot_graph(plan, index);
  }
  write_file(c.out, text);
  if (written.json) {
    written.files.push_back({{"path", c.out}, {"schedule", index}, {"algorithm", plan.schedules[index].algorithm}});
    return;
  }
  fmt::print("wrote {} (schedule {}, {})\n", c.out, index, plan.schedules[index].algorithm);
}

void print_json(const CodegenCommand& c, const Written& written) {
  nlohmann::json document{{"format", "flexplan-codegen"},
                          {"target", c.target},
                          {"output", c.out},
                          {"files", written.files}};
  if (c.target == "msccl-xml") {
    document["refused"] = written.refused;
    document["skipped"] = written.skipped;
  }
  for (const auto& [key, value] : written.extra.items()) document[key] = value;
  fmt::print("{}\n", document.dump(2));
}

void write(const CodegenCommand& c, Written& written) {
  if (c.chunks > 32767) throw BadInput("--chunks must be at most 32767 (16-bit chunk offsets)");
  // Whole schedules: the generators index steps and ops as the runtime's programs number them.
  const ir::Plan loaded = ir::load_plan_file(c.plan_path);
  if (c.target == "msccl-xml") return export_msccl(c, loaded, written);
  if (c.target == "dot") return draw(c, loaded, written);  // the machine view reads pipelines compact
  const ir::Plan plan = ir::materialize(loaded);
  if (c.target == "cpp") return generate_cpp(c, loaded, plan, written);
  draw(c, plan, written);
}

void run(const CodegenCommand& c) {
  try {
    Written written;
    written.json = c.format == "json";
    write(c, written);
    if (written.json) print_json(c, written);
  } catch (const BadInput& e) {
    fmt::print(stderr, "flexplan: error: {}\n", e.what());
    exit_status() = kExitBadInput;
  }
}

void setup(CLI::App& app) {
  auto c = std::make_shared<CodegenCommand>();
  CLI::App* command = app.add_subcommand(
      "codegen", "Compile a plan for a backend (per-rank C++, MSCCL XML) or draw it (trace, dot)");
  command->add_option("PLAN", c->plan_path, "plan.bin, or a plan in the text form")->required();
  command->add_option("--target", c->target, "what to write")
      ->required()
      ->check(CLI::IsMember({"cpp", "msccl-xml", "trace", "dot"}));
  command->add_option("-o,--output", c->out, "folder (cpp, msccl-xml) or file (trace, dot)")->required();
  command->add_flag("--rccl", c->rccl, "msccl-xml: only the step types RCCL runs (s, r, cpy, re, nop)");
  command->add_option("--chunks", c->chunks, "msccl-xml: nchunksperloop (default: the units, at most 256)");
  command->add_option("--proto", c->protocol, "msccl-xml: protocol")
      ->check(CLI::IsMember({"Simple", "LL", "LL128"}))
      ->capture_default_str();
  command->add_option("--max-steps", c->max_steps, "msccl-xml: steps per threadblock the executor holds")
      ->check(CLI::Range(1, 1 << 15))
      ->capture_default_str();
  command->add_option("--max-threadblocks", c->max_threadblocks, "msccl-xml: threadblocks per gpu")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  command->add_option("--max-channels", c->max_channels, "msccl-xml: channels to spread threadblocks over")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  command->add_option("--topology", c->topology_path, "trace: the plan's topology (its hash is checked)");
  command->add_option("-b,--minbytes", c->bytes, "trace: message size (also picks the schedule)")
      ->capture_default_str();
  command->add_option("--bytes", c->old_bytes, "deprecated: -b/--minbytes");
  command->add_option("--schedule", c->schedule, "trace, dot: schedule index (default: by -b; dot: 0)");
  command->add_option("--collective", c->collective,
                      "trace: the collective whose schedule -b picks (default: allreduce, or the plan's first "
                      "schedule's when it plans none)");
  command->add_option("--root", c->root, "trace: the root of a broadcast or reduce -b picks")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  command->add_option("--hop-overhead", c->hop_overhead, "trace: software cost per hop")->capture_default_str();
  add_format_option(*command, c->format);
  command->callback([c] {
    if (!c->old_bytes.empty()) {
      warn("--bytes is deprecated: give the size as -b/--minbytes");
      c->bytes = c->old_bytes;
    }
    run(*c);
  });
}

const Registration registration("codegen", setup);

}  // namespace
}  // namespace flexplan::cli
