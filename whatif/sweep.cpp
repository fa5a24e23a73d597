// The sweep loop (sweep.hpp): points handed out to worker threads, results in point order.
#include "whatif/sweep.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <mutex>
#include <thread>

#include <fmt/core.h>

namespace flexplan::whatif {
namespace {

std::string point_text(const std::vector<Variation>& variations, const std::vector<std::string>& values) {
  std::string where;
  for (size_t v = 0; v < variations.size(); ++v)
    where += fmt::format("{}{}={}", v ? ", " : "", variations[v].axis, values[v]);
  return where;
}

}  // namespace

bool replans_from(const Topology& given, const Topology& point) {
  return point.hash() != given.hash() && point.learner_names() == given.learner_names();
}

Sweep run_sweep(const Topology& base, const std::string& file, std::vector<Variation> variations,
                const AnalysisOptions& options, const SweepOptions& sweep_options,
                const std::function<void(size_t, size_t)>& progress) {
  Sweep sweep;
  sweep.topology_name = base.name();
  sweep.topology_file = file;
  sweep.options = options;
  const size_t total = grid_size(variations);
  const EditableTree tree = editable_copy(base);
  sweep.points.resize(total);
  // Every point of the base's learners is planned from the base's plan, as re-planning the
  // cluster would (`flexplan VARIED.json --from BASE.bin`): its schedules race again
  // (KeptSchedule), so that a faster link does not get a plan priced dearer than the base's.
  // Found by the first point that needs it (a sweep whose every point has other learners never
  // plans the base); not where `algorithms` names the candidates (nothing is kept then).
  std::once_flag kept_found;
  std::vector<KeptSchedule> kept;
  const auto kept_of_base = [&]() -> const std::vector<KeptSchedule>& {
    if (sweep_options.algorithms.empty())
      std::call_once(kept_found, [&] {
        kept = Pricer(sweep_options.algorithms, sweep_options.cost, sweep_options.leave_out).price(base).kept;
      });
    return kept;
  };

  std::atomic<size_t> next{0}, done{0};
  std::atomic<bool> failed{false};
  std::mutex mutex;  // guards the fields below
  size_t failed_point = total;
  std::exception_ptr error;

  const auto work = [&](Pricer& pricer) {
    // The last point's tree when it had the base shape: points that vary only links give it
    // their figures in place instead of building a new one.
    std::optional<Topology> same_shape;
    for (size_t i; !failed && (i = next++) < total;) {
      SweepPoint& out = sweep.points[i];
      try {
        const GridPoint point = grid_point(variations, i);
        for (size_t v = 0; v < variations.size(); ++v)
          out.values.push_back(variations[v].labels[point.index[v]]);
        const EditableTree varied = vary(tree, variations, point);
        std::optional<Topology> reshaped;
        try {
          if (varied.shape_changed)
            reshaped.emplace(to_topology(varied));
          else if (same_shape)
            copy_links(varied, *same_shape);
          else
            same_shape.emplace(to_topology(varied));
        } catch (const TopologyError& e) {
          throw TopologyError(fmt::format("point {} ({})", i, point_text(variations, out.values)),
                              e.what());
        }
        Topology& topo = reshaped ? *reshaped : *same_shape;
        out.result = analyse_point(topo, pricer, options,
                                   replans_from(base, topo) ? kept_of_base() : std::vector<KeptSchedule>{});
      } catch (...) {
        std::lock_guard lock(mutex);
        if (i < failed_point) failed_point = i, error = std::current_exception();
        failed = true;
      }
      ++done;
    }
  };

  const unsigned jobs = std::max(1u, std::min<unsigned>(sweep_options.jobs, static_cast<unsigned>(total)));
  std::vector<Pricer> pricers;
  for (unsigned j = 0; j < jobs; ++j) pricers.emplace_back(sweep_options.algorithms, sweep_options.cost, sweep_options.leave_out);
  std::vector<std::thread> workers;
  for (unsigned j = 0; j < jobs; ++j) workers.emplace_back(work, std::ref(pricers[j]));
  // The calling thread only tells progress.
  while (done < total && !failed) {
    if (progress) progress(done, total);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  for (auto& w : workers) w.join();
  if (error) std::rethrow_exception(error);
  if (progress) progress(total, total);

  for (auto& pricer : pricers) {
    sweep.schedules_built += pricer.schedules_built();
    sweep.plans_priced += pricer.plans_priced();
    for (const auto& name : pricer.left_out())
      if (std::find(sweep.left_out.begin(), sweep.left_out.end(), name) == sweep.left_out.end())
        sweep.left_out.push_back(name);
  }
  sweep.variations = std::move(variations);
  return sweep;
}

}  // namespace flexplan::whatif
