// The topology as JSON (topology_writer.hpp).
#include "topology/topology_writer.hpp"

#include <nlohmann/json.hpp>
#include <fmt/core.h>

namespace flexplan {
namespace {

nlohmann::ordered_json node_json(const Topology& topo, NodeId n) {
  nlohmann::ordered_json node;
  node["name"] = topo.node(n).name;
  if (n != topo.root()) {
    const Link& link = topo.uplink(n);
    node["link"] = {{"bandwidth", fmt::format("{:.17g} B/s", link.bandwidth)},
                    {"latency", fmt::format("{:.17g} s", link.latency)}};
  }
  if (topo.is_learner(n)) {
    node["rank"] = topo.rank_of(n);
    return node;
  }
  auto& children = node["children"] = nlohmann::ordered_json::array();
  for (NodeId child : topo.children(n)) children.push_back(node_json(topo, child));
  return node;
}

}  // namespace

std::string topology_to_json(const Topology& topo) {
  nlohmann::ordered_json doc;
  doc["name"] = topo.name();
  if (topo.reduce_bandwidth() > 0)
    doc["reduce_bandwidth"] = fmt::format("{:.17g} B/s", topo.reduce_bandwidth());
  if (topo.hop_overhead()) doc["hop_overhead"] = fmt::format("{:.17g} s", *topo.hop_overhead());
  doc["root"] = node_json(topo, topo.root());
  return doc.dump(1) + "\n";
}

}  // namespace flexplan
