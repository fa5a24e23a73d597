// `flexplan probe`: the measuring is flexplan-probe's, an MPI program (probe/, above the
// runtime), so that this program needs no MPI. Under a launcher (mpirun) every process execs
// flexplan-probe from beside this binary with the same arguments; outside one it says how to
// launch it. `flexplan probe --compare DECLARED.json MEASURED.json` compares two files
// link by link without measuring (docs/probe.md).
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "cli/arguments.hpp"
#include "cli/command.hpp"
#include "probe/model.hpp"
#include "topology/topology.hpp"

namespace flexplan::cli {
namespace {

bool under_launcher() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE", "PMI_RANK"})
    if (std::getenv(v)) return true;
  return false;
}

std::string probe_binary() {
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("flexplan-probe") : (self.parent_path() / "flexplan-probe").string();
}

struct ProbeArgs {
  std::vector<std::string> compare;  // DECLARED [MEASURED]
  std::string tolerance = "10%";
  std::string format = "text";  // of the two-file comparison
  std::vector<std::string> rest;
};

// --format json: the comparison as one document, a row per link.
std::string comparison_json(const probe::Comparison& c, double tolerance) {
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& r : c.rows)
    rows.push_back({{"link", r.declared_name},
                    {"measured_link", r.measured_name},
                    {"declared_bandwidth_bytes_per_second", r.declared_bandwidth},
                    {"measured_bandwidth_bytes_per_second", r.measured_bandwidth},
                    {"measured_bandwidth_is_a_floor", r.measured_floor},
                    {"bandwidth_off", r.bandwidth_off},
                    {"declared_latency_seconds", r.declared_latency},
                    {"measured_latency_seconds", r.measured_latency},
                    {"latency_off", r.latency_off}});
  const auto seconds = [](const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); };
  const nlohmann::json document{{"format", "flexplan-probe-compare"},
                                {"tolerance", tolerance},
                                {"links", rows},
                                {"unmatched", c.unmatched},
                                {"declared_hop_overhead_seconds", seconds(c.declared_hop_overhead)},
                                {"measured_hop_overhead_seconds", seconds(c.measured_hop_overhead)},
                                {"links_off", std::count_if(c.rows.begin(), c.rows.end(), [](const auto& r) {
                                   return r.bandwidth_off || r.latency_off;
                                 })}};
  return document.dump(2) + "\n";
}

int offline_compare(const ProbeArgs& a) {
  const double tol = probe::parse_fraction(a.tolerance, "--compare-tolerance");
  const Topology declared = load_topology(a.compare[0]);
  const Topology measured = load_topology(a.compare[1]);
  const auto c = probe::compare(declared, measured, tol, 50e-6);
  fmt::print("{}", a.format == "json" ? comparison_json(c, tol) : probe::format_comparison(c, tol));
  return c.any_off() || !c.unmatched.empty() ? kExitFailed : kExitOk;
}

void run(const ProbeArgs& a, const std::vector<std::string>& argv_rest) {
  try {
    if (a.compare.size() == 2) {
      if (!a.rest.empty()) throw probe::ProbeInputError("--compare with two files compares them; give no other arguments");
      exit_status() = offline_compare(a);
      return;
    }
    if (a.compare.size() > 2) throw probe::ProbeInputError("--compare takes one topology (to measure against) or two (to compare)");
    if (a.format != "text")
      throw probe::ProbeInputError("--format applies to --compare with two files; measuring writes the topology "
                                   "file (-o) and prints its progress");
    if (!under_launcher()) {
      throw probe::ProbeInputError(
          "flexplan probe measures with one process per learner; launch it with mpirun, e.g.\n"
          "  mpirun -np 8 flexplan probe --budget 60s -o topology.json\n"
          "(or run flexplan-probe the same way; `flexplan probe --compare DECLARED.json MEASURED.json` compares two files "
          "without measuring)");
    }
    const std::string binary = probe_binary();
    std::vector<std::string> args{binary};
    args.insert(args.end(), argv_rest.begin(), argv_rest.end());
    std::vector<char*> c_args;
    for (auto& s : args) c_args.push_back(s.data());
    c_args.push_back(nullptr);
    execv(binary.c_str(), c_args.data());
    fmt::print(stderr, "flexplan: error: cannot run {}: {}\n", binary, std::strerror(errno));
    exit_status() = kExitInternal;  // could not finish: the install lacks flexplan-probe
  } catch (const TopologyError& e) {
    fmt::print(stderr, "flexplan: error: topology: {}\n", e.what());
    exit_status() = kExitBadInput;
  } catch (const probe::ProbeInputError& e) {
    fmt::print(stderr, "flexplan: error: {}\n", e.what());
    exit_status() = kExitBadInput;
  }
}

void setup(CLI::App& app) {
  auto args = std::make_shared<ProbeArgs>();
  CLI::App* command = app.add_subcommand(
      "probe",
      "Measure the cluster this job runs on and write its topology (under mpirun, one process per learner; "
      "runs flexplan-probe, whose --help lists its options), or compare two topologies link by link");
  command->allow_extras();
  command->add_option("--compare", args->compare,
                      "DECLARED.json [MEASURED.json]: with two files, compare them; with one, measure and compare")
      ->expected(1, 2);
  command->add_option("--compare-tolerance", args->tolerance, "how far off a link may be")->capture_default_str();
  add_format_option(*command, args->format)->description("the two-file comparison's form: text or json");
  command->callback([args, command] {
    args->rest = command->remaining();
    // What flexplan-probe gets: everything after `probe`, as given.
    std::vector<std::string> pass;
    if (args->compare.size() == 1) pass = {"--compare", args->compare[0], "--compare-tolerance", args->tolerance};
    pass.insert(pass.end(), args->rest.begin(), args->rest.end());
    run(*args, pass);
  });
}

const Registration registration("probe", setup);

}  // namespace
}  // namespace flexplan::cli
