// Slurm topology.conf, tree plugin (slurm_topology.hpp).
#include "topology/slurm_topology.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "topology/hostlist.hpp"
#include "topology/import_error.hpp"
#include "topology/printable.hpp"

namespace flexplan {
namespace {

std::string lower(std::string_view text) {
  std::string out(text);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool blank(char c) { return c == ' ' || c == '\t' || c == '\r'; }

// Lines joined where one ends in a backslash, each with the number of its first line.
std::vector<std::pair<int, std::string>> logical_lines(std::string_view text) {
  std::vector<std::pair<int, std::string>> lines;
  std::string current;
  int first = 0, number = 0;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t end = std::min(text.find('\n', start), text.size());
    std::string_view line = text.substr(start, end - start);
    ++number;
    if (const size_t hash = line.find('#'); hash != std::string_view::npos) line = line.substr(0, hash);
    while (!line.empty() && blank(line.back())) line.remove_suffix(1);
    if (current.empty()) first = number;
    const bool continues = !line.empty() && line.back() == '\\';
    if (continues) line.remove_suffix(1);
    current += line;
    if (continues) {
      current += ' ';
    } else {
      lines.emplace_back(first, std::move(current));
      current.clear();
    }
    if (end == text.size()) break;
    start = end + 1;
  }
  if (!current.empty()) lines.emplace_back(first, std::move(current));
  return lines;
}

std::vector<std::string> expand(const std::string& source, int line, const std::string& key,
                                const std::string& value, size_t& budget) {
  try {
    auto names = expand_hostlist(value, budget);
    budget -= names.size();
    return names;
  } catch (const HostlistError& e) {
    throw ImportError(source, line, fmt::format("{}={}: {} (at character {} of the list)", key,
                                                detail::escaped(value), e.what(), e.position() + 1));
  }
}

}  // namespace

std::string read_import_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ImportError(path, 0, fmt::format("cannot open: {}", std::strerror(errno)));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw ImportError(path, 0, "cannot read it");
  return text.str();
}

std::vector<std::string> SlurmTopology::machines_in_order() const {
  std::vector<std::string> out;
  if (top < 0) return out;
  // Iterative, so that a deep chain of switches cannot exhaust the stack.
  std::vector<int> stack{top};
  while (!stack.empty()) {
    const int s = stack.back();
    stack.pop_back();
    const auto& sw = switches[static_cast<size_t>(s)];
    out.insert(out.end(), sw.nodes.begin(), sw.nodes.end());
    for (auto it = sw.switches.rbegin(); it != sw.switches.rend(); ++it) stack.push_back(index_of_switch.at(*it));
  }
  return out;
}

SlurmTopology parse_slurm_topology(std::string_view text, const std::string& source, size_t max_names) {
  SlurmTopology topo;
  size_t budget = max_names;  // names left for the file's hostlists together
  topo.source = source;
  std::map<std::string, int> node_line;
  for (const auto& logical : logical_lines(text)) {
    // Named, not a structured binding: clang 14 cannot capture one in the lambda below.
    const int line = logical.first;
    const std::string& content = logical.second;
    SlurmSwitch sw;
    sw.line = line;
    bool have_name = false, have_switches = false, have_nodes = false;
    size_t i = 0;
    while (i < content.size()) {
      if (blank(content[i]) || content[i] == ' ') {
        ++i;
        continue;
      }
      size_t end = i;
      while (end < content.size() && !blank(content[end]) && content[end] != ' ') ++end;
      const std::string word = content.substr(i, end - i);
      i = end;
      const size_t eq = word.find('=');
      if (eq == std::string::npos || eq == 0) {
        throw ImportError(source, line, fmt::format("'{}' is not KEY=VALUE (keys: SwitchName, Switches, Nodes, "
                                                    "LinkSpeed)",
                                                    detail::escaped(word)));
      }
      const std::string key = lower(std::string_view(word).substr(0, eq));
      const std::string value = word.substr(eq + 1);
      auto once = [&](bool& seen) {
        if (seen) throw ImportError(source, line, fmt::format("{} is given twice", word.substr(0, eq)));
        seen = true;
      };
      if (value.empty()) throw ImportError(source, line, fmt::format("{} has no value", word.substr(0, eq)));
      if (key == "switchname") {
        once(have_name);
        if (value.find_first_of("[],/") != std::string::npos)
          throw ImportError(source, line, fmt::format("SwitchName={}: a switch name cannot hold '[', ']', ',' or '/'",
                                                      detail::escaped(value)));
        sw.name = value;
      } else if (key == "switches") {
        once(have_switches);
        sw.switches = expand(source, line, "Switches", value, budget);
      } else if (key == "nodes") {
        once(have_nodes);
        sw.nodes = expand(source, line, "Nodes", value, budget);
      } else if (key == "linkspeed") {
        sw.link_speed = value;
      } else {
        throw ImportError(source, line,
                          fmt::format("unknown key '{}' (the tree plugin's keys: SwitchName, Switches, Nodes, "
                                      "LinkSpeed)",
                                      detail::escaped(word.substr(0, eq))));
      }
    }
    if (!have_name && !have_switches && !have_nodes && sw.link_speed.empty()) continue;  // blank
    if (!have_name) throw ImportError(source, line, "a line without SwitchName=");
    if (topo.index_of_switch.count(sw.name)) {
      throw ImportError(source, line, fmt::format("switch '{}' is already defined on line {}", sw.name,
                                                  topo.switches[static_cast<size_t>(topo.index_of_switch[sw.name])].line));
    }
    const int index = static_cast<int>(topo.switches.size());
    for (const auto& node : sw.nodes) {
      if (node.find('/') != std::string::npos)
        throw ImportError(source, line, fmt::format("machine name '{}' holds a '/'", detail::escaped(node)));
      auto [it, fresh] = node_line.emplace(node, line);
      if (!fresh && topo.switch_of_node[node] == index)  // this switch is not in topo.switches yet
        throw ImportError(source, line, fmt::format("machine '{}' is listed twice", detail::escaped(node)));
      if (!fresh) {
        throw ImportError(source, line, fmt::format("machine '{}' is already under switch '{}' (line {})",
                                                    detail::escaped(node),
                                                    topo.switches[static_cast<size_t>(topo.switch_of_node[node])].name,
                                                    it->second));
      }
      topo.switch_of_node[node] = index;
    }
    topo.index_of_switch[sw.name] = index;
    topo.switches.push_back(std::move(sw));
  }
  if (topo.switches.empty()) throw ImportError(source, 0, "no switch defined (expected lines like SwitchName=s0 Nodes=node[01-16])");

  topo.parent.assign(topo.switches.size(), -1);
  for (size_t s = 0; s < topo.switches.size(); ++s) {
    const auto& sw = topo.switches[s];
    for (const auto& child : sw.switches) {
      const auto it = topo.index_of_switch.find(child);
      if (it == topo.index_of_switch.end())
        throw ImportError(source, sw.line, fmt::format("switch '{}' lists switch '{}', which no line defines", sw.name,
                                                       detail::escaped(child)));
      const int c = it->second;
      if (c == static_cast<int>(s)) throw ImportError(source, sw.line, fmt::format("switch '{}' lists itself", sw.name));
      if (topo.parent[static_cast<size_t>(c)] == static_cast<int>(s))
        throw ImportError(source, sw.line, fmt::format("switch '{}' lists switch '{}' twice", sw.name, child));
      if (topo.parent[static_cast<size_t>(c)] >= 0) {
        const auto& other = topo.switches[static_cast<size_t>(topo.parent[static_cast<size_t>(c)])];
        throw ImportError(source, sw.line, fmt::format("switch '{}' is already under switch '{}' (line {}); a tree "
                                                       "gives each switch one parent",
                                                       child, other.name, other.line));
      }
      topo.parent[static_cast<size_t>(c)] = static_cast<int>(s);
    }
  }
  std::vector<int> tops;
  for (size_t s = 0; s < topo.switches.size(); ++s)
    if (topo.parent[s] < 0) tops.push_back(static_cast<int>(s));
  if (tops.empty()) {
    throw ImportError(source, topo.switches[0].line, "the switches form a loop: every switch is under another");
  }
  // Every switch must reach the top without passing itself again (a loop beside the tree).
  for (size_t s = 0; s < topo.switches.size(); ++s) {
    size_t steps = 0;
    for (int at = static_cast<int>(s); at >= 0; at = topo.parent[static_cast<size_t>(at)]) {
      if (++steps > topo.switches.size()) {
        throw ImportError(source, topo.switches[s].line,
                          fmt::format("switch '{}' is in a loop of switches listing each other", topo.switches[s].name));
      }
    }
  }
  if (tops.size() > 1) {
    std::string names;
    for (size_t k = 0; k < tops.size() && k < 4; ++k) {
      const auto& sw = topo.switches[static_cast<size_t>(tops[k])];
      names += fmt::format("{}'{}' (line {})", k ? ", " : "", sw.name, sw.line);
    }
    if (tops.size() > 4) names += fmt::format(" and {} more", tops.size() - 4);
    throw ImportError(source, topo.switches[static_cast<size_t>(tops[1])].line,
                      fmt::format("{} switches are under no other: {}; the cluster must be one tree (add a line "
                                  "such as SwitchName=top Switches=...)",
                                  tops.size(), names));
  }
  topo.top = tops[0];
  return topo;
}

SlurmTopology load_slurm_topology(const std::string& path) {
  return parse_slurm_topology(read_import_file(path), path);
}

}  // namespace flexplan
