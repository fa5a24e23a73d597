// The Python module _flexplan_torch: the process group class, for flexplan_torch to register,
// and the probe over torch's store (flexplan_torch.probe, for torchrun).
#include <torch/csrc/utils/pybind.h>

#include <vector>

#include "probe/run_probe.hpp"
#include "process_group.hpp"
#include "store_group.hpp"

namespace py = pybind11;
using flexplan::torch_backend::ProcessGroupFlexplan;

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
      .def_property_readonly("fallbacks", &ProcessGroupFlexplan::fallbacks);
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
}
