// Per-link traffic of a schedule (link_traffic.hpp).
#include "whatif/link_traffic.hpp"

#include "codegen/lowering.hpp"
#include "ir/pipeline_form.hpp"

namespace flexplan::whatif {
namespace {

void add_route(const Topology& topo, int from, int to, double bytes, LinkTraffic& traffic) {
  const auto route = topo.route(from, to);
  for (NodeId n : route.up) traffic.up[n] += bytes;
  for (NodeId n : route.down) traffic.down[n] += bytes;
}

}  // namespace

LinkTraffic schedule_traffic(const Topology& topo, const ir::Schedule& schedule) {
  LinkTraffic traffic{std::vector<double>(topo.num_nodes()), std::vector<double>(topo.num_nodes())};
  // A compact pipeline is walked as its expansion, read from the base (pipeline_form.hpp).
  const double units = static_cast<double>(ir::expanded_units(schedule));
  const size_t steps = ir::expanded_step_count(schedule, schedule.slices);
  for (size_t t = 0; t < steps; ++t)
    ir::for_each_expanded_op(schedule, schedule.slices, t, [&](size_t, const ir::Op& op) {
      const double share = static_cast<double>(op.end - op.begin) / units;
      for (const auto& hop : codegen::lower_op(op)) add_route(topo, hop.src, hop.dst, share, traffic);
    });
  return traffic;
}

LinkTraffic ring_traffic(const Topology& topo) {
  LinkTraffic traffic{std::vector<double>(topo.num_nodes()), std::vector<double>(topo.num_nodes())};
  const auto order = topo.learners_under(topo.root());
  const size_t p = order.size();
  if (p < 2) return traffic;
  const double per_pass = 2.0 * static_cast<double>(p - 1) / static_cast<double>(p);
  for (size_t i = 0; i < p; ++i) add_route(topo, order[i], order[(i + 1) % p], per_pass, traffic);
  return traffic;
}

}  // namespace flexplan::whatif
