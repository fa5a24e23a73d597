// Slurm's topology.conf for the tree plugin ("SwitchName=s0 Nodes=node[01-16]",
// "SwitchName=top Switches=s[0-3]"): the switch tree and the machines under each switch. A
// library for every command that needs the tree (flexplan topo import, flexplan probe).
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace flexplan {

struct SlurmSwitch {
  std::string name;
  std::vector<std::string> switches;  // child switches, expanded, in file order
  std::vector<std::string> nodes;     // machines directly under it, expanded, in file order
  std::string link_speed;             // LinkSpeed as written ("" if absent); Slurm's own units, unused
  int line = 0;                       // where it is defined
};

struct SlurmTopology {
  std::string source;                 // the file name, for messages
  std::vector<SlurmSwitch> switches;  // in file order
  int top = -1;                       // the one switch no other lists
  std::vector<int> parent;            // per switch: its parent's index, -1 for the top
  std::map<std::string, int> switch_of_node;  // machine -> index of its switch
  std::map<std::string, int> index_of_switch;

  // Machines in depth-first order from the top (child switches in the order listed, a
  // switch's own nodes before its child switches), the order an importer numbers learners in.
  std::vector<std::string> machines_in_order() const;
};

// Reads the text of a topology.conf. Keys are case-insensitive as Slurm reads them; '#' starts
// a comment; a line ending in '\' continues on the next. SwitchName, Switches, Nodes and
// LinkSpeed are known; any other key is an error. Throws ImportError naming `source` and the
// line for: an unknown key, a line without SwitchName, a switch defined twice, a hostlist that
// does not expand, a child switch that is never defined, a switch listed under two parents, a
// machine under two switches, a loop, and no single top switch (none, or several trees).
// `max_names` bounds the machines and switch names all its hostlists expand to together.
SlurmTopology parse_slurm_topology(std::string_view text, const std::string& source,
                                   size_t max_names = 1'000'000);
SlurmTopology load_slurm_topology(const std::string& path);

// The whole of a text file, or ImportError(path, 0, "cannot open: ...").
std::string read_import_file(const std::string& path);

}  // namespace flexplan
