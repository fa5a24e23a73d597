// Joining a cluster's own descriptions into a topology (cluster_import.hpp).
#include "topology/cluster_import.hpp"

#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "topology/hostlist.hpp"
#include "topology/import_error.hpp"
#include "topology/printable.hpp"

namespace flexplan {
namespace {

std::string trim(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) text.remove_prefix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.remove_suffix(1);
  return std::string(text);
}

// A figure as the JSON spells it: the friendly form where it reads back exactly.
std::string bandwidth_text(double bytes_per_second) {
  const std::string friendly = format_bandwidth(bytes_per_second);
  try {
    if (parse_bandwidth(friendly) == bytes_per_second) return friendly;
  } catch (const std::exception&) {
  }
  return fmt::format("{:.17g} B/s", bytes_per_second);
}

std::string latency_text(double seconds) {
  const std::string friendly = format_latency(seconds);
  try {
    if (parse_latency(friendly) == seconds) return friendly;
  } catch (const std::exception&) {
  }
  return fmt::format("{:.17g} s", seconds);
}

struct Figure {
  double bandwidth = 0;  // 0: no source gave one
  std::string bandwidth_source;
  std::optional<double> latency;
  std::string latency_source;
};

struct Machine {
  std::string name;
  std::vector<Figure> learners;
  Figure uplink;
};

struct Switch {
  std::string name;
  std::vector<int> switches;           // indices into the switch list
  std::vector<int> machines;           // indices into the machine list
  Figure uplink;
  int line = 0;
};

}  // namespace

LinkOverride parse_link_override(const std::string& text, const std::string& source, int line, size_t max_names) {
  LinkOverride link;
  link.source = line > 0 ? fmt::format("{}:{}", source, line) : source;
  const size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0)
    throw ImportError(source, line, fmt::format("'{}': expected NAMES=BANDWIDTH[,LATENCY], such as s0=100Gbit/s,5us",
                                                detail::escaped(text)));
  link.names = trim(std::string_view(text).substr(0, eq));
  std::string figures = text.substr(eq + 1);
  const size_t comma = figures.find(',');
  try {
    link.bandwidth = parse_bandwidth(trim(figures.substr(0, comma)));
    if (comma != std::string::npos) link.latency = parse_latency(trim(figures.substr(comma + 1)));
  } catch (const std::exception& e) {
    throw ImportError(source, line, fmt::format("'{}': {}", detail::escaped(text), e.what()));
  }
  try {
    if (expand_hostlist(link.names, max_names).empty()) throw HostlistError(0, "no name");
  } catch (const HostlistError& e) {
    throw ImportError(source, line, fmt::format("'{}': the names '{}': {}", detail::escaped(text), detail::escaped(link.names),
                                                e.what()));
  }
  return link;
}

std::vector<LinkOverride> parse_link_overrides(std::string_view text, const std::string& source, size_t max_names) {
  std::vector<LinkOverride> out;
  int number = 0;
  size_t start = 0;
  while (start < text.size()) {
    const size_t end = std::min(text.find('\n', start), text.size());
    std::string line(text.substr(start, end - start));
    start = end + 1;
    ++number;
    if (const size_t hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    line = trim(line);
    if (line.empty()) continue;
    if (line.find('=') == std::string::npos) {
      // "NAMES BANDWIDTH [LATENCY]": the figures may hold a space ("100 Gbit/s"), so the names
      // are the first word and the rest splits at the last word that is a latency.
      const size_t space = line.find_first_of(" \t");
      if (space == std::string::npos)
        throw ImportError(source, number, fmt::format("'{}': expected NAMES BANDWIDTH [LATENCY] or NAMES=BANDWIDTH[,LATENCY]",
                                                      detail::escaped(line)));
      std::string rest = trim(line.substr(space));
      std::string names = line.substr(0, space);
      // Try the whole rest as a bandwidth; else split off a trailing latency.
      std::string joined = names + "=" + rest;
      try {
        (void)parse_bandwidth(rest);
      } catch (const std::exception&) {
        for (size_t cut = rest.find_last_of(" \t"); cut != std::string::npos && cut > 0;
             cut = rest.find_last_of(" \t", cut - 1)) {
          try {
            (void)parse_latency(trim(rest.substr(cut)));
            (void)parse_bandwidth(trim(rest.substr(0, cut)));
            joined = names + "=" + trim(rest.substr(0, cut)) + "," + trim(rest.substr(cut));
            break;
          } catch (const std::exception&) {
          }
        }
      }
      out.push_back(parse_link_override(joined, source, number, max_names));
    } else {
      out.push_back(parse_link_override(line, source, number, max_names));
    }
  }
  return out;
}

DescriptionSpec parse_description_spec(DescriptionSpec::Kind kind, const std::string& text) {
  DescriptionSpec spec;
  spec.kind = kind;
  spec.option = text;
  const size_t eq = text.find('=');
  if (eq != std::string::npos) {
    spec.hosts = text.substr(0, eq);
    spec.path = text.substr(eq + 1);
  } else {
    spec.path = text;
  }
  const std::string flag = kind == DescriptionSpec::Kind::NcclXml ? "--nccl-xml" : "--nvidia-smi";
  if (spec.path.empty()) throw ImportError(flag, 0, fmt::format("'{}': no file named", detail::escaped(text)));
  if (!spec.hosts.empty()) {
    try {
      if (expand_hostlist(spec.hosts).empty()) throw HostlistError(0, "no host named");
    } catch (const HostlistError& e) {
      throw ImportError(flag, 0, fmt::format("'{}': the hosts '{}': {}", detail::escaped(text), detail::escaped(spec.hosts), e.what()));
    }
  }
  return spec;
}

namespace {

// The description of one machine, loaded once per file.
struct Description {
  std::optional<NcclMachine> nccl;
  std::optional<SmiTopology> smi;
};

class Importer {
 public:
  explicit Importer(const ImportOptions& options) : options_(options) {}

  ImportResult run() {
    build_tree();
    describe_machines();
    apply_overrides();
    fill_defaults();
    return write();
  }

 private:
  const ImportOptions& options_;
  std::vector<Switch> switches_;  // switches_[0] is the top
  std::vector<Machine> machines_;
  std::map<std::string, std::shared_ptr<Description>> loaded_;  // by path
  ImportResult result_;

  std::string read(const std::string& path) {
    return options_.read_file ? options_.read_file(path) : read_import_file(path);
  }

  // ---- the tree: Slurm's switches, or one switch over the listed machines ----

  std::vector<std::string> chosen_hosts() const {
    std::vector<std::string> hosts;
    for (const auto& entry : options_.hostfile) hosts.push_back(entry.host);
    for (const auto& host : options_.hosts)
      if (std::find(hosts.begin(), hosts.end(), host) == hosts.end()) hosts.push_back(host);
    return hosts;
  }

  void build_tree() {
    const auto hosts = chosen_hosts();
    if (!options_.slurm) {
      if (hosts.empty())
        throw TopologyError("topo import", "no machines: give --slurm topology.conf, --hostfile FILE or --hosts HOSTLIST");
      switches_.push_back({options_.top_name, {}, {}, {}, 0});
      for (const auto& host : hosts) {
        switches_[0].machines.push_back(static_cast<int>(machines_.size()));
        machines_.push_back({host, {}, {}});
      }
      return;
    }
    const SlurmTopology& slurm = *options_.slurm;
    std::set<std::string> wanted(hosts.begin(), hosts.end());
    for (const auto& entry : options_.hostfile) {
      if (!slurm.switch_of_node.count(entry.host))
        throw ImportError(options_.hostfile_source, entry.line,
                          fmt::format("host '{}' is under no switch of {}", detail::escaped(entry.host), slurm.source));
    }
    for (const auto& host : options_.hosts) {
      if (!slurm.switch_of_node.count(host))
        throw ImportError("--hosts", 0, fmt::format("host '{}' is under no switch of {}", detail::escaped(host), slurm.source));
    }
    // Depth first from the top, keeping the switches with a chosen machine below them.
    struct Builder {
      const SlurmTopology& slurm;
      const std::set<std::string>& wanted;
      std::vector<Switch>& switches;
      std::vector<Machine>& machines;
      int depth = 0;
      int add(int s) {
        if (++depth > 64) {
          const auto& sw = slurm.switches[static_cast<size_t>(s)];
          throw ImportError(slurm.source, sw.line, "the switch tree is more than 64 levels deep");
        }
        const auto& sw = slurm.switches[static_cast<size_t>(s)];
        const int index = static_cast<int>(switches.size());
        switches.push_back({sw.name, {}, {}, {}, sw.line});
        for (const auto& node : sw.nodes) {
          if (!wanted.empty() && !wanted.count(node)) continue;
          switches[static_cast<size_t>(index)].machines.push_back(static_cast<int>(machines.size()));
          machines.push_back({node, {}, {}});
        }
        for (const auto& child : sw.switches) {
          const int c = add(slurm.index_of_switch.at(child));
          if (c >= 0) switches[static_cast<size_t>(index)].switches.push_back(c);
        }
        --depth;
        if (index != 0 && switches[static_cast<size_t>(index)].switches.empty() &&
            switches[static_cast<size_t>(index)].machines.empty()) {
          switches.pop_back();
          return -1;
        }
        return index;
      }
    };
    Builder{slurm, wanted, switches_, machines_}.add(slurm.top);
    if (machines_.empty()) throw ImportError(slurm.source, 0, "no machine under any switch");
    // A switch and a machine of one name under one parent could not be told apart.
    for (const auto& sw : switches_) {
      std::map<std::string, bool> names;
      for (int c : sw.switches) names[switches_[static_cast<size_t>(c)].name] = true;
      for (int m : sw.machines) {
        if (names.count(machines_[static_cast<size_t>(m)].name))
          throw ImportError(slurm.source, sw.line, fmt::format("switch '{}' has a switch and a machine both named '{}'", sw.name,
                                                               machines_[static_cast<size_t>(m)].name));
      }
    }
    for (const auto& sw : slurm.switches) {
      if (!sw.link_speed.empty()) {
        result_.notes.push_back(fmt::format("{}:{}: LinkSpeed={} ignored: Slurm's units are its own and unused; give "
                                            "the switch's uplink with --link {}=BANDWIDTH or let flexplan probe measure it",
                                            slurm.source, sw.line, detail::escaped(sw.link_speed), sw.name));
        break;
      }
    }
  }

  // ---- inside each machine ----

  std::shared_ptr<Description> description_for(const std::string& host) {
    const DescriptionSpec* match = nullptr;
    for (const auto& spec : options_.descriptions) {
      if (!spec.hosts.empty() && !hostlist_contains(spec.hosts, host)) continue;
      if (match && !match->hosts.empty() == !spec.hosts.empty()) {
        throw ImportError(spec.kind == DescriptionSpec::Kind::NcclXml ? "--nccl-xml" : "--nvidia-smi", 0,
                          fmt::format("machine '{}' is described by both '{}' and '{}'", host, match->option, spec.option));
      }
      // A spec naming hosts is more specific than one for every machine.
      if (!match || !spec.hosts.empty()) match = &spec;
    }
    if (!match) return nullptr;
    std::string path = match->path;
    for (size_t at; (at = path.find("{host}")) != std::string::npos;) path.replace(at, 6, host);
    auto& slot = loaded_[path + (match->kind == DescriptionSpec::Kind::NcclXml ? "\x01x" : "\x01s")];
    if (!slot) {
      slot = std::make_shared<Description>();
      const std::string text = read(path);
      if (match->kind == DescriptionSpec::Kind::NcclXml) slot->nccl = parse_nccl_topology(text, path);
      else slot->smi = parse_nvidia_smi_topology(text, path);
    }
    return slot;
  }

  void describe_machines() {
    std::map<std::string, int> slots;
    std::map<std::string, int> slot_line;
    for (const auto& entry : options_.hostfile) {
      slots[entry.host] = entry.slots;
      slot_line[entry.host] = entry.line;
    }
    for (auto& machine : machines_) {
      const auto description = description_for(machine.name);
      std::vector<Figure> gpus;
      if (description && description->nccl) {
        const NcclMachine& nccl = *description->nccl;
        for (const auto& gpu : nccl.gpus) {
          Figure f;
          if (gpu.nvlinks > 0) {
            f.bandwidth = gpu.nvlink_bandwidth;
            f.bandwidth_source = fmt::format("{}:{} ({} NVLinks x {}, SM {})", nccl.source, gpu.line, gpu.nvlinks,
                                             format_bandwidth(nvlink_bandwidth_per_link(gpu.sm)), gpu.sm);
          } else if (gpu.pci_bandwidth > 0) {
            f.bandwidth = gpu.pci_bandwidth;
            f.bandwidth_source = fmt::format("{}:{} (PCIe)", nccl.source, gpu.pci_line);
          }
          gpus.push_back(f);
        }
        if (!nccl.nics.empty()) {
          double sum = 0;
          std::string lines;
          for (const auto& nic : nccl.nics) {
            sum += nic.speed;
            lines += fmt::format("{}{}", lines.empty() ? "" : ",", nic.line);
          }
          machine.uplink.bandwidth = sum;
          machine.uplink.bandwidth_source =
              fmt::format("{}:{} ({} NIC{}{})", nccl.source, lines, nccl.nics.size(), nccl.nics.size() == 1 ? "" : "s",
                          nccl.nics.size() == 1 ? "" : ", summed");
        }
      } else if (description && description->smi) {
        const SmiTopology& smi = *description->smi;
        for (size_t g = 0; g < smi.gpus.size(); ++g) {
          Figure f;
          if (const int links = smi.nvlinks_of(g); links > 0) {
            f.bandwidth = links * nvlink_bandwidth_per_link(options_.sm);
            f.bandwidth_source = fmt::format("{}:{} ({} NVLinks x {}, SM {} from --sm)", smi.source, smi.gpu_lines[g], links,
                                             format_bandwidth(nvlink_bandwidth_per_link(options_.sm)), options_.sm);
          }
          gpus.push_back(f);
        }
      }
      // How many learners: --learners, else the hostfile's slots, else the GPUs described.
      int count = 0;
      if (options_.learners > 0) count = options_.learners;
      else if (slots.count(machine.name) && slots[machine.name] > 0) count = slots[machine.name];
      else count = static_cast<int>(gpus.size());
      if (count == 0) {
        if (slot_line.count(machine.name))
          throw ImportError(options_.hostfile_source, slot_line[machine.name],
                            fmt::format("host '{}' has no slots=N and no NCCL XML or nvidia-smi file describes it; give "
                                        "slots=N or --learners N",
                                        machine.name));
        throw TopologyError("topo import", fmt::format("machine '{}': no learner count: give --learners N, a hostfile with "
                                                       "slots=N, or an NCCL XML or nvidia-smi file for it",
                                                       machine.name));
      }
      if (!gpus.empty() && count > static_cast<int>(gpus.size())) {
        result_.notes.push_back(fmt::format("machine '{}': {} learners on {} GPUs; learner k takes GPU k mod {}'s link",
                                            machine.name, count, gpus.size(), gpus.size()));
      }
      for (int k = 0; k < count; ++k)
        machine.learners.push_back(gpus.empty() ? Figure{} : gpus[static_cast<size_t>(k) % gpus.size()]);
    }
  }

  // ---- figures given by hand ----

  void apply_overrides() {
    std::map<std::string, std::vector<Figure*>> by_name;
    for (auto& sw : switches_) by_name[sw.name].push_back(&sw.uplink);
    for (auto& machine : machines_) by_name[machine.name].push_back(&machine.uplink);
    const std::string top = switches_[0].name;
    for (const auto& link : options_.links) {
      bool matched = false;
      for (const auto& name : expand_hostlist(link.names)) {
        if (name == top) {
          throw TopologyError(link.source, fmt::format("'{}' is the top switch, which has no uplink", name));
        }
        const auto it = by_name.find(name);
        if (it == by_name.end()) continue;
        matched = true;
        for (Figure* f : it->second) {
          f->bandwidth = link.bandwidth;
          f->bandwidth_source = link.source;
          if (link.latency) {
            f->latency = link.latency;
            f->latency_source = link.source;
          }
        }
      }
      if (!matched)
        throw TopologyError(link.source, fmt::format("'{}' names no switch or machine of the imported tree", link.names));
    }
    if (options_.learner_link) {
      for (auto& machine : machines_) {
        for (auto& f : machine.learners) {
          if (f.bandwidth == 0) {
            f.bandwidth = options_.learner_link->bandwidth;
            f.bandwidth_source = options_.learner_link->source;
          }
          if (!f.latency && options_.learner_link->latency) {
            f.latency = options_.learner_link->latency;
            f.latency_source = options_.learner_link->source;
          }
        }
      }
    }
  }

  // ---- what no source gives ----

  double subtree_rate(int s) {
    // A switch's default uplink carries all its children at once: no oversubscription.
    double sum = 0;
    const Switch& sw = switches_[static_cast<size_t>(s)];
    for (int m : sw.machines) sum += machines_[static_cast<size_t>(m)].uplink.bandwidth;
    for (int c : sw.switches) sum += switches_[static_cast<size_t>(c)].uplink.bandwidth;
    return sum;
  }

  void fill_defaults() {
    std::vector<std::string> missing;
    const std::string kDefault = "default: measure me";
    for (auto& machine : machines_) {
      std::vector<size_t> lacking;
      for (size_t k = 0; k < machine.learners.size(); ++k) {
        auto& f = machine.learners[k];
        if (!f.latency) {
          f.latency = kDefaultLearnerLatency;
          f.latency_source = "default";
        }
        if (f.bandwidth > 0) continue;
        lacking.push_back(k);
        f.bandwidth = kDefaultLearnerBandwidth;
        f.bandwidth_source = kDefault + " (PCIe 3.0 x16, as NCCL assumes)";
        ++result_.defaults;
      }
      if (!lacking.empty())
        missing.push_back(fmt::format("the links of {} learner{} of machine '{}'", lacking.size(),
                                      lacking.size() == 1 ? "" : "s", machine.name));
      if (!machine.uplink.latency) {
        machine.uplink.latency = kDefaultNetworkLatency;
        machine.uplink.latency_source = "default";
      }
      if (machine.uplink.bandwidth == 0) {
        missing.push_back(fmt::format("the uplink of machine '{}'", machine.name));
        machine.uplink.bandwidth = kDefaultMachineBandwidth;
        machine.uplink.bandwidth_source = kDefault + " (100 Gbit/s, as NCCL assumes)";
        ++result_.defaults;
      }
    }
    // Bottom up: children before parents (the builder numbers parents first).
    for (int s = static_cast<int>(switches_.size()) - 1; s >= 1; --s) {
      auto& f = switches_[static_cast<size_t>(s)].uplink;
      if (!f.latency) {
        f.latency = kDefaultNetworkLatency;
        f.latency_source = "default";
      }
      if (f.bandwidth == 0) {
        missing.push_back(fmt::format("the uplink of switch '{}'", switches_[static_cast<size_t>(s)].name));
        f.bandwidth = subtree_rate(s);
        f.bandwidth_source = kDefault + " (the sum of its children's: not oversubscribed)";
        ++result_.defaults;
      }
    }
    if (!missing.empty() && !options_.allow_defaults) {
      std::string list;
      for (size_t k = 0; k < missing.size() && k < 20; ++k) list += "\n  " + missing[k];
      if (missing.size() > 20) list += fmt::format("\n  and {} more", missing.size() - 20);
      throw TopologyError(
          "topo import",
          fmt::format("no source gives the bandwidth of{}\ngive them with --link NAMES=BANDWIDTH (or --links FILE, "
                      "--learner-link BANDWIDTH, an NCCL XML file), or write defaults to be measured with "
                      "--allow-defaults (then flexplan probe)",
                      list));
    }
    if (!missing.empty())
      result_.notes.push_back(fmt::format("{} bandwidth{} at defaults, marked 'measure me' in the description",
                                          result_.defaults, result_.defaults == 1 ? "" : "s"));
  }

  // ---- the JSON and the report ----

  static nlohmann::ordered_json link_json(const Figure& f) {
    return {{"bandwidth", bandwidth_text(f.bandwidth)}, {"latency", latency_text(*f.latency)}};
  }

  void report(const std::string& node, const Figure& f) {
    result_.links.push_back({node, f.bandwidth, *f.latency, f.bandwidth_source, f.latency_source});
  }

  // Learners fold into one "gpu{i}" entry when their figures agree (each GPU's figure comes
  // from its own line of a dump, so the sources may still differ).
  static bool same(const Figure& a, const Figure& b) { return a.bandwidth == b.bandwidth && a.latency == b.latency; }

  nlohmann::ordered_json machine_json(const Machine& machine, const std::string& path) {
    nlohmann::ordered_json node;
    node["name"] = machine.name;
    node["link"] = link_json(machine.uplink);
    report(path, machine.uplink);
    auto& children = node["children"] = nlohmann::ordered_json::array();
    const auto& learners = machine.learners;
    if (std::all_of(learners.begin(), learners.end(), [&](const Figure& f) { return same(f, learners[0]); })) {
      children.push_back({{"name", "gpu{i}"}, {"count", learners.size()}, {"link", link_json(learners[0])}});
      Figure shown = learners[0];
      if (std::any_of(learners.begin(), learners.end(),
                      [&](const Figure& f) { return f.bandwidth_source != shown.bandwidth_source; }))
        shown.bandwidth_source += fmt::format(" (gpu0's; the other {} alike)", learners.size() - 1);
      report(learners.size() == 1 ? path + "/gpu0" : fmt::format("{}/gpu[0..{}]", path, learners.size() - 1), shown);
    } else {
      for (size_t k = 0; k < learners.size(); ++k) {
        children.push_back({{"name", fmt::format("gpu{}", k)}, {"link", link_json(learners[k])}});
        report(fmt::format("{}/gpu{}", path, k), learners[k]);
      }
    }
    return node;
  }

  nlohmann::ordered_json switch_json(int s, const std::string& path) {
    const Switch& sw = switches_[static_cast<size_t>(s)];
    nlohmann::ordered_json node;
    node["name"] = sw.name;
    if (s != 0) {
      node["link"] = link_json(sw.uplink);
      report(path, sw.uplink);
    }
    auto& children = node["children"] = nlohmann::ordered_json::array();
    for (int m : sw.machines) {
      const auto& machine = machines_[static_cast<size_t>(m)];
      children.push_back(machine_json(machine, path + "/" + machine.name));
    }
    for (int c : sw.switches) children.push_back(switch_json(c, path + "/" + switches_[static_cast<size_t>(c)].name));
    return node;
  }

  ImportResult write() {
    nlohmann::ordered_json doc;
    doc["name"] = options_.name.empty() ? "imported" : options_.name;
    std::string description = "written by flexplan topo import";
    std::vector<std::string> measure;
    const auto root = switch_json(0, switches_[0].name);
    for (const auto& link : result_.links)
      if (link.bandwidth_source.rfind("default: measure me", 0) == 0) measure.push_back(link.node);
    if (!measure.empty()) {
      description += "; bandwidths at defaults (measure me): ";
      for (size_t k = 0; k < measure.size() && k < 50; ++k) description += (k ? ", " : "") + measure[k];
      if (measure.size() > 50) description += fmt::format(" and {} more", measure.size() - 50);
    }
    doc["description"] = description;
    doc["root"] = root;
    result_.json = doc.dump(1) + "\n";
    // Read back as any topology is, so that what is written plans (names, limits, learners).
    const Topology topology = parse_topology(result_.json, "the imported topology");
    result_.switches = static_cast<int>(switches_.size());
    result_.machines = static_cast<int>(machines_.size());
    result_.learners = topology.num_learners();
    return std::move(result_);
  }
};

}  // namespace

ImportResult import_cluster(const ImportOptions& options) { return Importer(options).run(); }

}  // namespace flexplan
