// The Python module _flexplan_torch: the process group class, for flexplan_torch to register.
#include <torch/csrc/utils/pybind.h>

#include "process_group.hpp"

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
}
