// The one place where an axrt_status_t becomes a Python exception.
#ifndef AXRT_PYTHON_STATUS_H_
#define AXRT_PYTHON_STATUS_H_

#include <pybind11/pybind11.h>

#include "axrt/axrt.h"

namespace axrt_py {

namespace py = pybind11;

// Raised (as a C++ exception) once the Python error is set; pybind11 passes
// the pending Python error on.
using PythonError = py::error_already_set;

// Takes ownership of `status`. Does nothing for OK; otherwise frees it and
// throws the axrt.Error subclass of its code, whose message is the C
// message unchanged and whose `code` attribute is the code's name.
void check(axrt_status_t status);

// The exception class for `code` (axrt.Error for codes without their own).
py::handle error_class(axrt_status_code_t code);

// Creates axrt.Error and its subclasses in `m`.
void init_errors(py::module_& m);

}  // namespace axrt_py

#endif  // AXRT_PYTHON_STATUS_H_
