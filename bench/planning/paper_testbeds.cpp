// flexplan_paper_testbeds: the predicted FlexReduce (and BlueConnect) saving over ring on the
// FlexReduce paper's testbeds, beside the paper's measured savings, as a Markdown table
// (docs/paper-testbeds.md is this program's output).
//
//   flexplan_paper_testbeds [TOPOLOGY_DIR]   (default: the source tree's topologies/)
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/core.h>

#include "planner/algorithms.hpp"
#include "planner/cost_model.hpp"
#include "planner/floor.hpp"
#include "topology/topology.hpp"

namespace {

using namespace flexplan;

// The paper's two sizes: 120K and 120M float32 gradient items.
constexpr double kSmall = 120e3 * 4;
constexpr double kLarge = 120e6 * 4;

std::string machine_sizes(const Topology& topo) {
  std::string text;
  for (NodeId m : topo.children(topo.root()))
    text += (text.empty() ? "" : "+") + std::to_string(topo.learners_under(m).size());
  return text;
}

std::string saving(double time, double ring) { return fmt::format("{:.1f}%", 100 * (1 - time / ring)); }

}  // namespace

int main(int argc, char** argv) {
  const std::filesystem::path dir =
      argc > 1 ? argv[1] : std::filesystem::path(FLEXPLAN_SOURCE_DIR) / "topologies";
  const std::vector<std::string> names = {"paper-2m-4", "paper-2m-5",  "paper-2m-6",
                                          "paper-2m-7", "paper-2m-8",  "paper-3m-9",
                                          "paper-3m-10", "paper-3m-11", "paper-3m-12"};
  fmt::print("| testbed | GPUs | FlexReduce saving, 120K | 120M | BlueConnect saving, 120K | "
             "120M | FlexReduce / floor, 120M | paper, measured FlexReduce saving |\n");
  fmt::print("|---|---|---|---|---|---|---|---|\n");
  for (const auto& name : names) {
    const auto topo = load_topology((dir / (name + ".json")).string());
    const auto ring = evaluate_schedule(topo, plan_ring(topo));
    const auto fr = evaluate_schedule(topo, plan_flexreduce(topo));
    const auto bc = evaluate_schedule(topo, plan_blueconnect(topo));
    const bool two_machines = topo.degree(topo.root()) == 2;
    fmt::print("| {} | {}{} | {} | {} | {} | {} | {:.2f} | {} |\n", name, machine_sizes(topo),
               blueconnect_falls_back(topo) ? "" : " (symmetric)", saving(fr.at(kSmall), ring.at(kSmall)),
               saving(fr.at(kLarge), ring.at(kLarge)), saving(bc.at(kSmall), ring.at(kSmall)),
               saving(bc.at(kLarge), ring.at(kLarge)),
               fr.at(kLarge) / cost_floor(topo).at(kLarge), two_machines ? "32-42%" : "21-25%");
  }
  return 0;
}
