// `flexplan topo import`: writes topology JSON from what a cluster already describes (Slurm's
// topology.conf, NCCL topology dumps, nvidia-smi topo -m, a hostfile, figures by hand) and
// prints where every figure came from. The joining is topology/cluster_import.cpp.
#include "cli/topo_import.hpp"

#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "cli/arguments.hpp"
#include "cli/command.hpp"
#include "topology/cluster_import.hpp"
#include "topology/hostlist.hpp"
#include "topology/import_error.hpp"

namespace flexplan::cli {
namespace {

struct ImportArgs {
  std::string output;
  std::string slurm;
  std::string hostfile;
  std::string hosts;
  int learners = 0;
  std::vector<std::string> nccl_xml;
  std::vector<std::string> nvidia_smi;
  int sm = 80;
  std::vector<std::string> links;
  std::string links_file;
  std::string learner_link;
  bool allow_defaults = false;
  std::string name;
  std::string format = "text";
};

void print_report(std::FILE* to, const ImportResult& result, const std::string& output) {
  fmt::print(to, "imported {} switch{}, {} machine{}, {} learner{} -> {}\n", result.switches,
             result.switches == 1 ? "" : "es", result.machines, result.machines == 1 ? "" : "s", result.learners,
             result.learners == 1 ? "" : "s", output == "-" ? "standard output" : output);
  size_t width = 4;
  for (const auto& link : result.links) width = std::max(width, link.node.size());
  width = std::min<size_t>(width, 48);
  fmt::print(to, "\n  {:<{}}  {:>12}  {:>8}  source\n", "link", width, "bandwidth", "latency");
  for (const auto& link : result.links) {
    const std::string source = link.latency_source == link.bandwidth_source
                                   ? link.bandwidth_source
                                   : fmt::format("{}; latency: {}", link.bandwidth_source, link.latency_source);
    fmt::print(to, "  {:<{}}  {:>12}  {:>8}  {}\n", link.node, width, format_bandwidth(link.bandwidth),
               format_latency(link.latency), source);
  }
  if (!result.notes.empty()) fmt::print(to, "\n");
  for (const auto& note : result.notes) fmt::print(to, "note: {}\n", note);
}

// --format json: the report as one document (the topology itself is the file written).
std::string report_json(const ImportResult& result, const std::string& output) {
  nlohmann::json links = nlohmann::json::array();
  for (const ImportedLink& link : result.links)
    links.push_back({{"link", link.node},
                     {"bandwidth_bytes_per_second", link.bandwidth},
                     {"latency_seconds", link.latency},
                     {"bandwidth_source", link.bandwidth_source},
                     {"latency_source", link.latency_source}});
  const nlohmann::json document{{"format", "flexplan-topo-import"},
                                {"output", output},
                                {"switches", result.switches},
                                {"machines", result.machines},
                                {"learners", result.learners},
                                {"defaults", result.defaults},
                                {"links", links},
                                {"notes", result.notes}};
  return document.dump(2) + "\n";
}

void report(std::FILE* to, const ImportArgs& args, const ImportResult& result) {
  if (args.format == "json")
    fmt::print(to, "{}", report_json(result, args.output));
  else
    print_report(to, result, args.output);
}

void run(const ImportArgs& args) {
  ImportOptions options;
  if (!args.slurm.empty()) options.slurm = load_slurm_topology(args.slurm);
  if (!args.hostfile.empty()) {
    options.hostfile = load_hostfile(args.hostfile);
    options.hostfile_source = args.hostfile;
  }
  if (!args.hosts.empty()) {
    try {
      options.hosts = expand_hostlist(args.hosts);
    } catch (const HostlistError& e) {
      throw ImportError("--hosts", 0, fmt::format("'{}': {} (at character {})", args.hosts, e.what(), e.position() + 1));
    }
  }
  options.learners = args.learners;
  for (const auto& spec : args.nccl_xml)
    options.descriptions.push_back(parse_description_spec(DescriptionSpec::Kind::NcclXml, spec));
  for (const auto& spec : args.nvidia_smi)
    options.descriptions.push_back(parse_description_spec(DescriptionSpec::Kind::NvidiaSmi, spec));
  options.sm = args.sm;
  if (!args.links_file.empty()) options.links = parse_link_overrides(read_import_file(args.links_file), args.links_file);
  for (const auto& link : args.links) options.links.push_back(parse_link_override(link, "--link " + link));
  if (!args.learner_link.empty())
    options.learner_link = parse_link_override("learners=" + args.learner_link, "--learner-link " + args.learner_link);
  options.allow_defaults = args.allow_defaults;
  options.name = args.name;
  const ImportResult result = import_cluster(options);
  // With the topology on standard output the report goes to standard error, in either form.
  if (args.output == "-") {
    fmt::print("{}", result.json);
    report(stderr, args, result);
    return;
  }
  std::ofstream out(args.output, std::ios::binary);
  out << result.json;
  out.close();
  if (!out) throw TopologyError(args.output, "cannot write the topology there");
  report(stdout, args, result);
}

}  // namespace

void add_topo_import(CLI::App& topo) {
  auto args = std::make_shared<ImportArgs>();
  CLI::App* cmd = topo.add_subcommand(
      "import",
      "Write topology JSON from what the cluster describes: Slurm topology.conf, NCCL topology XML "
      "(NCCL_TOPO_DUMP_FILE), nvidia-smi topo -m, a hostfile; print each figure's source (docs/topology.md, "
      "Importing)");
  cmd->add_option("-o,--output", args->output, "the topology JSON to write ('-': standard output)")->required();
  cmd->add_option("--slurm", args->slurm, "Slurm topology.conf (tree plugin): the switch tree and its machines");
  cmd->add_option("--hostfile", args->hostfile,
                  "Open MPI hostfile ('host slots=N') or MPICH ('host:N'): the machines to use and their learners");
  cmd->add_option("--hosts", args->hosts, "hostlist of the machines to use ('node[01-16]')");
  cmd->add_option("--learners", args->learners, "learners per machine, over every other source")
      ->check(CLI::Range(1, 100000));
  cmd->add_option("--nccl-xml", args->nccl_xml,
                  "NCCL topology dump: FILE for every machine, HOSTLIST=FILE for some, or a pattern with {host} "
                  "for one file per machine (repeatable)");
  cmd->add_option("--nvidia-smi", args->nvidia_smi,
                  "nvidia-smi topo -m output, in the same forms as --nccl-xml (repeatable)");
  cmd->add_option("--sm", args->sm, "SM version of the GPUs nvidia-smi files describe, for NVLink rates")
      ->check(CLI::Range(10, 1000))
      ->capture_default_str();
  cmd->add_option("--link", args->links,
                  "NAMES=BANDWIDTH[,LATENCY]: the uplink of switches or machines, NAMES a hostlist "
                  "('s0=100Gbit/s', 'node[01-04]=200Gbit/s,2us'); repeatable, over the files' figures");
  cmd->add_option("--links", args->links_file, "a file of such lines ('NAMES=BANDWIDTH[,LATENCY]', '#' comments)");
  cmd->add_option("--learner-link", args->learner_link,
                  "BANDWIDTH[,LATENCY] for learners no NCCL XML or nvidia-smi file gives a figure");
  cmd->add_flag("--allow-defaults", args->allow_defaults,
                "write bandwidths no source gives at documented defaults, marked 'measure me', instead of refusing");
  cmd->add_option("--name", args->name, "the topology's name")->capture_default_str();
  add_format_option(*cmd, args->format);  // the report's form (the topology is always JSON)
  cmd->callback([args] { run(*args); });
}

}  // namespace flexplan::cli
