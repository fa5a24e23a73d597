// Joins what a cluster already describes into a topology: Slurm's switch tree, NCCL topology
// dumps or nvidia-smi matrices for the inside of machines, a hostfile or a count for learners
// per machine, and link figures given by hand. Every figure keeps its source (file:line, an
// option, or a default to be measured) for the report `flexplan topo import` prints.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "topology/nccl_topo_xml.hpp"
#include "topology/slurm_topology.hpp"

namespace flexplan {

// A link figure given by hand: `--link NAMES=BANDWIDTH[,LATENCY]` or a line of an override
// file. NAMES is a hostlist expression of switch and machine names ("s0", "node[01-04]").
struct LinkOverride {
  std::string names;
  double bandwidth = 0;            // bytes/s
  std::optional<double> latency;   // seconds
  std::string source;              // "--link s0=100Gbit/s" or "links.txt:3"
};

// Parses "NAMES=BANDWIDTH[,LATENCY]" (the units of docs/topology.md: "s0=100Gbit/s,2us").
// Throws ImportError(source, line, ...) naming what is wrong.
LinkOverride parse_link_override(const std::string& text, const std::string& source, int line = 0,
                                 size_t max_names = 1'000'000);
// An override file: one "NAMES=BANDWIDTH[,LATENCY]" or "NAMES BANDWIDTH [LATENCY]" a line,
// '#' comments.
std::vector<LinkOverride> parse_link_overrides(std::string_view text, const std::string& source,
                                               size_t max_names = 1'000'000);

// What describes the inside of some machines: an NCCL dump or an nvidia-smi matrix, for the
// machines `hosts` names ("" for every machine), or per machine through a path pattern.
// The command line writes these as FILE, HOSTLIST=FILE or PATTERN with {host}.
struct DescriptionSpec {
  enum class Kind { NcclXml, NvidiaSmi } kind = Kind::NcclXml;
  std::string hosts;    // hostlist; empty: every machine
  std::string path;     // a file, or a pattern holding {host}
  std::string option;   // as written, for messages
};
DescriptionSpec parse_description_spec(DescriptionSpec::Kind kind, const std::string& text);

struct ImportOptions {
  std::optional<SlurmTopology> slurm;
  std::vector<HostfileEntry> hostfile;
  std::string hostfile_source;
  std::vector<std::string> hosts;   // --hosts, expanded: the machines to use
  int learners = 0;                 // --learners: learners per machine, over every other source
  std::vector<DescriptionSpec> descriptions;
  int sm = 80;                      // SM version for nvidia-smi's NVLink counts
  std::vector<LinkOverride> links;  // later ones win
  std::optional<LinkOverride> learner_link;  // for learners no description gives a figure
  bool allow_defaults = false;
  std::string name;                 // the topology's name
  std::string top_name = "switch";  // the top node where no Slurm tree is given
  // Reads a description file (tests hand in text; the command reads files). Default: from disk.
  std::function<std::string(const std::string& path)> read_file;
};

// Defaults for figures no source gives (docs/topology.md, "Importing"). Latencies never block:
// no source gives them; bandwidths do, unless allow_defaults.
inline constexpr double kDefaultLearnerLatency = 5e-6;
inline constexpr double kDefaultNetworkLatency = 10e-6;
inline constexpr double kDefaultLearnerBandwidth = 12e9;        // NCCL's PCI_BW: PCIe 3.0 x16
inline constexpr double kDefaultMachineBandwidth = 100e9 / 8;   // NCCL's NET_BW: 100 Gbit/s

struct ImportedLink {
  std::string node;               // full name, or "m0/gpu[0..7]" for a machine's like learners
  double bandwidth = 0, latency = 0;
  std::string bandwidth_source;   // "dgx.xml:12 (12 NVLinks x 20 GB/s, SM 80)", "--link ...", "default: measure me"
  std::string latency_source;
};

struct ImportResult {
  std::string json;                 // the topology, in the format of docs/topology.md
  std::vector<ImportedLink> links;  // every uplink, depth first
  std::vector<std::string> notes;   // what was ignored or assumed
  int switches = 0, machines = 0, learners = 0;
  int defaults = 0;                 // bandwidths left at defaults (measure me)
};

// Throws ImportError for a malformed or inconsistent source (naming file and line), and
// TopologyError (where "topo import") for what is missing: no machines, a machine without a
// learner count, bandwidths no source gives without allow_defaults (each listed).
ImportResult import_cluster(const ImportOptions& options);

}  // namespace flexplan
