// What an upgrade costs: prices per link from a small JSON file (`whatif --costs FILE`,
// docs/whatif.md, "Upgrade costs"), so that the advice can rank upgrades by time saved per cost.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "topology/topology.hpp"

namespace flexplan::whatif {

// {"unit": "USD", "prices": {"machines": 1500, "learners": 400, "switches": 9000,
//   "link:core/rack2": 20000, "name:core/rack0/*": 900, "under:core/rack1": 1200, "all": 1000}}
// Each price is what upgrading one link of the class costs (its bandwidth times the upgrade
// factor). A link takes the price of the most specific key that names it: link:, then name:
// (first match in file order), then under: (the deepest NODE), then its kind (learners: a
// learner's uplink; machines: a machine's; switches: any other), then all.
struct UpgradeCosts {
  struct Price {
    std::string key;  // as written
    double price = 0;
  };
  std::string unit = "units";
  std::string file;
  std::vector<Price> prices;  // in file order

  // The price of upgrading the link above `node`, or none where no key names it.
  std::optional<double> link_price(const Topology&, NodeId node) const;
};

// Throws std::invalid_argument naming the file and the key or field at fault.
UpgradeCosts load_upgrade_costs(const std::string& path);
UpgradeCosts parse_upgrade_costs(const std::string& json_text, const std::string& name);

}  // namespace flexplan::whatif
