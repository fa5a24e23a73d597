// The sweep loop (sweep.hpp).
#include "whatif/sweep.hpp"

#include <fmt/core.h>

namespace flexplan::whatif {

Sweep run_sweep(const Topology& base, const std::string& file, std::vector<Variation> variations,
                const AnalysisOptions& options, Pricer& pricer,
                const std::function<void(size_t, size_t)>& progress) {
  Sweep sweep;
  sweep.topology_name = base.name();
  sweep.topology_file = file;
  sweep.options = options;
  const size_t total = grid_size(variations);
  const EditableTree tree = editable_copy(base);
  sweep.points.reserve(total);
  for (size_t i = 0; i < total; ++i) {
    const GridPoint point = grid_point(variations, i);
    SweepPoint out;
    for (size_t v = 0; v < variations.size(); ++v)
      out.values.push_back(variations[v].labels[point.index[v]]);
    const EditableTree varied = vary(tree, variations, point);
    std::optional<Topology> topo;
    try {
      topo.emplace(to_topology(varied));
    } catch (const TopologyError& e) {
      std::string where;
      for (size_t v = 0; v < variations.size(); ++v)
        where += fmt::format("{}{}={}", v ? ", " : "", variations[v].axis, out.values[v]);
      throw TopologyError(fmt::format("point {} ({})", i, where), e.what());
    }
    out.result = analyse_point(*topo, pricer, options);
    sweep.points.push_back(std::move(out));
    if (progress) progress(i + 1, total);
  }
  sweep.left_out = pricer.left_out();
  sweep.variations = std::move(variations);
  return sweep;
}

}  // namespace flexplan::whatif
