// File: python/torch_backend/module.cc
// The extension tutti._torch_backend: ProcessGroupTutti as a subclass of torch's c10d Backend
// class, bound with torch's own pybind11 so that torch.distributed accepts it. Built against one
// exact torch version (TUTTI_TORCH_VERSION), which tutti/torch.py checks before importing it.
#include <pybind11/chrono.h>
#include <torch/csrc/utils/pybind.h>

#include "python/torch_backend/process_group.h"

namespace py = pybind11;

PYBIND11_MODULE(_torch_backend, m) {
  using tutti::torch_backend::ProcessGroupTutti;
  m.doc() = "tutti's c10d backend for torch.distributed. Use `import tutti.torch` instead.";
  m.attr("torch_version") = TUTTI_TORCH_VERSION;
  // The base class's pybind11 type lives in torch._C._distributed_c10d.
  py::module_::import("torch.distributed");
  py::class_<ProcessGroupTutti, c10d::Backend, c10::intrusive_ptr<ProcessGroupTutti>>(
      m, "ProcessGroupTutti",
      "A torch.distributed backend running over one tutti communicator (CPU tensors).")
      .def(py::init([](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                       std::chrono::milliseconds timeout) {
             return c10::make_intrusive<ProcessGroupTutti>(store, rank, size, timeout);
           }),
           py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout"),
           py::call_guard<py::gil_scoped_release>(),
           "Joins the group (every rank must call it): rank 0 publishes a tutti UniqueId in "
           "`store`, the others read it. `timeout` (timedelta) bounds every collective.");
}
