// The Python module _flexplan_torch: the process group class, for flexplan_torch to register,
// and the probe over torch's store (flexplan_torch.probe, for torchrun).
#include <torch/csrc/utils/pybind.h>

#include <vector>

#include "probe/run_probe.hpp"
#include "process_group.hpp"
#include "store_group.hpp"

namespace py = pybind11;
using flexplan::torch_backend::ProcessGroupFlexplan;

namespace {
// CommStats as plain Python values: {"rank", "timed", "plan_generation", "events", "schedules":
// [{"collective", "algorithm", "root", "min_bytes", "max_bytes", "plan_generation", "calls",
// "measured", "predicted", "steps": [{"level", "measured", "predicted"}]}]}; seconds summed over
// the calls, predicted None where unknown, max_bytes None for no bound.
py::dict stats_dict(const flexplan::CommStats& stats) {
  py::dict out;
  out["rank"] = stats.rank;
  out["timed"] = stats.timed;
  out["plan_generation"] = stats.plan_generation;
  out["events"] = stats.events;
  py::list schedules;
  for (const flexplan::ScheduleStats& s : stats.schedules) {
    py::dict d;
    d["collective"] = std::string(flexplan::ir::to_string(s.collective));
    d["algorithm"] = s.algorithm;
    d["root"] = s.root;
    d["min_bytes"] = s.min_bytes;
    d["max_bytes"] = s.max_bytes ? py::object(py::int_(*s.max_bytes)) : py::object(py::none());
    d["plan_generation"] = s.plan_generation;
    d["calls"] = s.calls;
    d["measured"] = s.measured;
    d["predicted"] = s.predicted >= 0 ? py::object(py::float_(s.predicted)) : py::object(py::none());
    py::list steps;
    for (const flexplan::StepStats& step : s.steps) {
      py::dict t;
      t["level"] = step.level;
      t["measured"] = step.measured;
      t["predicted"] = step.predicted >= 0 ? py::object(py::float_(step.predicted)) : py::object(py::none());
      steps.append(t);
    }
    d["steps"] = steps;
    schedules.append(d);
  }
  out["schedules"] = schedules;
  return out;
}

flexplan::CommStats stats_released(ProcessGroupFlexplan& group) {
  py::gil_scoped_release release;
  return group.stats();
}
}  // namespace

PYBIND11_MODULE(_flexplan_torch, m) {
  m.doc() = "flexplan's torch.distributed backend (use it through the flexplan_torch package)";
  // The base class must be known to pybind11 before a subclass is declared.
  py::module_::import("torch.distributed");
  py::class_<ProcessGroupFlexplan, c10d::ProcessGroup, c10::intrusive_ptr<ProcessGroupFlexplan>>(
      m, "ProcessGroupFlexplan")
      .def(py::init([](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                       int64_t timeout_ms, std::string plan, bool via_allreduce) {
             return c10::make_intrusive<ProcessGroupFlexplan>(
                 store, rank, size, std::chrono::milliseconds(timeout_ms), std::move(plan), via_allreduce);
           }),
           py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout_ms"),
           py::arg("plan") = "", py::arg("via_allreduce") = false, py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("plan", &ProcessGroupFlexplan::plan_path)
      .def_property_readonly("learner_name", &ProcessGroupFlexplan::learner_name)
      .def_property_readonly("via_allreduce", &ProcessGroupFlexplan::via_allreduce)
      // The collectives that ran as all-reduces for want of a schedule in the plan.
      .def_property_readonly("fallbacks", &ProcessGroupFlexplan::fallbacks)
      // Following the network (docs/pytorch.md): the report as a dict, and an explicit re-plan.
      .def("stats", [](ProcessGroupFlexplan& group) { return stats_dict(stats_released(group)); })
      .def("stats_text", [](ProcessGroupFlexplan& group) { return flexplan::format_stats(group.stats()); },
           py::call_guard<py::gil_scoped_release>())
      .def("replan", [](ProcessGroupFlexplan& group) {
        flexplan::ReplanResult result;
        {
          py::gil_scoped_release release;
          result = group.replan();
        }
        py::dict out;
        out["switched"] = result.switched;
        out["call"] = result.call;
        out["message"] = result.message;
        return out;
      });
  m.def(
      "probe",
      [](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size, int64_t timeout_ms,
         const std::vector<std::string>& argv) {
        flexplan::torch_backend::StoreGroup group(store, rank, size, std::chrono::milliseconds(timeout_ms));
        std::vector<const char*> args;
        for (const auto& a : argv) args.push_back(a.c_str());
        return flexplan::probe::run_probe(group, static_cast<int>(args.size()), args.data(),
                                          "torchrun --nproc_per_node N -m flexplan_torch.probe");
      },
      "Run flexplan's probe over the store (collective; argv[0] is the program name); returns the exit status",
      py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout_ms"), py::arg("argv"),
      py::call_guard<py::gil_scoped_release>());
  m.def(
      "probe_time_limit",
      [](const std::vector<std::string>& argv) {
        std::vector<const char*> args;
        for (const auto& a : argv) args.push_back(a.c_str());
        return flexplan::probe::probe_time_limit_seconds(static_cast<int>(args.size()), args.data());
      },
      "The longest the probe runs with these arguments (argv[0] is the program name), in seconds",
      py::arg("argv"));
}
