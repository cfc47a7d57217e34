// nexar._nexar_torch: the creator that nexar.torch registers with
// torch.distributed.Backend.register_backend("nexar", ...).
#include "process_group.hpp"

#include <pybind11/chrono.h>
#include <torch/csrc/utils/pybind.h>

PYBIND11_MODULE(_nexar_torch, m) {
  m.doc() = "nexar's torch.distributed backend (docs/torch.md)";
  m.def("create_process_group", &nexar_torch::ProcessGroupNexar::create,
        pybind11::arg("store"), pybind11::arg("rank"), pybind11::arg("size"),
        pybind11::arg("timeout"),
        pybind11::call_guard<pybind11::gil_scoped_release>(),
        "Makes the nexar ProcessGroup of one torch process group.");
  m.def("shutdown", &nexar_torch::ProcessGroupNexar::shutdownAll,
        "Stops the progress threads of every live nexar process group.");
  m.def("abort", &nexar_torch::ProcessGroupNexar::abortAll,
        "nexar_abort on every live nexar process group of this process.");
}
