// Upgrade prices per link class (upgrade_costs.hpp).
#include "whatif/upgrade_costs.hpp"

#include <fnmatch.h>

#include <cmath>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

namespace flexplan::whatif {
namespace {

// How deep `ancestor` is when it is a strict ancestor of `node`, else -1.
int depth_if_below(const Topology& topo, NodeId node, const std::string& ancestor) {
  std::vector<NodeId> above;
  for (NodeId n = node; n != topo.root();) {
    n = topo.parent(n);
    above.push_back(n);
  }
  for (size_t i = 0; i < above.size(); ++i)
    if (topo.full_name(above[i]) == ancestor) return static_cast<int>(above.size() - i);
  return -1;
}

constexpr const char* kKeys = "machines, learners, switches, all, link:NODE, name:GLOB, under:NODE";

}  // namespace

std::optional<double> UpgradeCosts::link_price(const Topology& topo, NodeId node) const {
  const std::string name = topo.full_name(node);
  for (const Price& p : prices)
    if (p.key.rfind("link:", 0) == 0 && p.key.substr(5) == name) return p.price;
  for (const Price& p : prices)
    if (p.key.rfind("name:", 0) == 0 && fnmatch(p.key.substr(5).c_str(), name.c_str(), 0) == 0)
      return p.price;
  std::optional<double> under;
  int deepest = -1;
  for (const Price& p : prices)
    if (p.key.rfind("under:", 0) == 0) {
      const int depth = depth_if_below(topo, node, p.key.substr(6));
      if (depth > deepest) deepest = depth, under = p.price;
    }
  if (under) return under;
  const char* kind = topo.is_learner(node) ? "learners" : topo.is_machine(node) ? "machines" : "switches";
  for (const Price& p : prices)
    if (p.key == kind) return p.price;
  for (const Price& p : prices)
    if (p.key == "all") return p.price;
  return std::nullopt;
}

UpgradeCosts parse_upgrade_costs(const std::string& text, const std::string& name) {
  const auto fail = [&](const std::string& what) {
    return std::invalid_argument(fmt::format("--costs {}: {}", name, what));
  };
  nlohmann::ordered_json j;
  try {
    j = nlohmann::ordered_json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    throw fail(fmt::format("not valid JSON ({})", e.what()));
  }
  if (!j.is_object()) throw fail("expected an object {\"unit\": ..., \"prices\": {...}}");
  UpgradeCosts costs;
  costs.file = name;
  for (const auto& [key, value] : j.items()) {
    if (key == "unit") {
      if (!value.is_string() || value.get<std::string>().empty())
        throw fail("\"unit\" must be a non-empty string (\"USD\")");
      costs.unit = value.get<std::string>();
    } else if (key == "prices") {
      if (!value.is_object() || value.empty())
        throw fail("\"prices\" must be an object of link classes to prices");
      for (const auto& [cls, price] : value.items()) {
        const bool known = cls == "machines" || cls == "learners" || cls == "switches" || cls == "all" ||
                           ((cls.rfind("link:", 0) == 0 || cls.rfind("name:", 0) == 0) && cls.size() > 5) ||
                           (cls.rfind("under:", 0) == 0 && cls.size() > 6);
        if (!known) throw fail(fmt::format("prices: unknown link class '{}' (expected {})", cls, kKeys));
        if (!price.is_number() || !std::isfinite(price.get<double>()) || price.get<double>() <= 0)
          throw fail(fmt::format("prices: '{}' must be a positive number", cls));
        costs.prices.push_back({cls, price.get<double>()});
      }
    } else {
      throw fail(fmt::format("unknown field '{}' (expected \"unit\" and \"prices\")", key));
    }
  }
  if (costs.prices.empty()) throw fail("no \"prices\" given");
  return costs;
}

UpgradeCosts load_upgrade_costs(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::invalid_argument(fmt::format("--costs {}: cannot read the file", path));
  std::stringstream text;
  text << in.rdbuf();
  return parse_upgrade_costs(text.str(), path);
}

}  // namespace flexplan::whatif
