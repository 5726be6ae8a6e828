// The extension module axrt._axrt; the package `axrt` re-exports it.
#include "binding.h"

PYBIND11_MODULE(_axrt, m) {
  m.doc() = "axrt's C API bound for Python; import the package `axrt` instead.";
  m.attr("__version__") = axrt_version_string();
  axrt_py::init_errors(m);
  axrt_py::init_dtypes(m);
  axrt_py::init_device(m);
  axrt_py::init_stream(m);
  axrt_py::init_tensor(m);
  axrt_py::init_dlpack(m);
  axrt_py::init_executable(m);
  axrt_py::init_builder(m);
}
