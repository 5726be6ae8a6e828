#include "status.h"

#include <array>

namespace axrt_py {
namespace {

struct ErrorSpec {
  axrt_status_code_t code;
  const char* name;       // the Python class name
  PyObject* extra_base;   // a built-in exception it also derives from, or null
  const char* doc;
};

// Filled by init_errors; index = status code. Holds strong references for
// the life of the process (exception classes outlive the module object).
std::array<PyObject*, AXRT_STATUS_CODE_DEVICE_LOST + 1> g_classes{};
PyObject* g_error = nullptr;

}  // namespace

py::handle error_class(axrt_status_code_t code) {
  if (code < g_classes.size() && g_classes[code]) return g_classes[code];
  return g_error;
}

void check(axrt_status_t status) {
  if (!status) return;
  const axrt_status_code_t code = axrt_status_code(status);
  py::str message(axrt_status_message(status));
  axrt_status_free(status);
  py::object exc = py::reinterpret_borrow<py::object>(error_class(code))(message);
  exc.attr("code") = py::str(axrt_status_code_name(code));
  PyErr_SetObject(error_class(code).ptr(), exc.ptr());
  throw PythonError();
}

void init_errors(py::module_& m) {
  g_error = PyErr_NewExceptionWithDoc(
      "axrt.Error",
      "Base class of every error axrt raises. str(e) is the runtime's message "
      "unchanged; e.code is the status code's name, such as 'INVALID_ARGUMENT'.",
      PyExc_RuntimeError, nullptr);
  if (!g_error) throw PythonError();
  m.add_object("Error", py::handle(g_error));

  const ErrorSpec specs[] = {
      {AXRT_STATUS_CODE_CANCELLED, "CancelledError", nullptr, "The operation was cancelled."},
      {AXRT_STATUS_CODE_UNKNOWN, "UnknownError", nullptr, "An error the runtime could not classify."},
      {AXRT_STATUS_CODE_INVALID_ARGUMENT, "InvalidArgumentError", PyExc_ValueError,
       "An argument is malformed: a bad shape, dtype, handle or file."},
      {AXRT_STATUS_CODE_DEADLINE_EXCEEDED, "DeadlineExceededError", PyExc_TimeoutError,
       "A wait ran out of time."},
      {AXRT_STATUS_CODE_NOT_FOUND, "NotFoundError", PyExc_LookupError,
       "A file, device, function, kernel or symbol does not exist."},
      {AXRT_STATUS_CODE_ALREADY_EXISTS, "AlreadyExistsError", nullptr, "A name is already taken."},
      {AXRT_STATUS_CODE_PERMISSION_DENIED, "PermissionDeniedError", PyExc_PermissionError,
       "Refused by policy, such as native code loaded without allow_native_code=True."},
      {AXRT_STATUS_CODE_RESOURCE_EXHAUSTED, "ResourceExhaustedError", nullptr,
       "Memory or another resource ran out."},
      {AXRT_STATUS_CODE_FAILED_PRECONDITION, "FailedPreconditionError", nullptr,
       "The object is not in a state that allows the call."},
      {AXRT_STATUS_CODE_ABORTED, "AbortedError", nullptr, "The operation was aborted."},
      {AXRT_STATUS_CODE_OUT_OF_RANGE, "OutOfRangeError", PyExc_ValueError,
       "An index, range or size lies outside what is allowed."},
      {AXRT_STATUS_CODE_UNIMPLEMENTED, "UnimplementedError", PyExc_NotImplementedError,
       "A feature, format version, dtype or device this runtime does not have."},
      {AXRT_STATUS_CODE_INTERNAL, "InternalError", nullptr, "A broken invariant inside axrt."},
      {AXRT_STATUS_CODE_UNAVAILABLE, "UnavailableError", nullptr, "A resource is not available now."},
      {AXRT_STATUS_CODE_DATA_LOSS, "DataLossError", nullptr,
       "Data is corrupt, such as a segment whose checksum does not match."},
      {AXRT_STATUS_CODE_UNAUTHENTICATED, "UnauthenticatedError", nullptr,
       "The caller is not authenticated."},
      {AXRT_STATUS_CODE_DEVICE_LOST, "DeviceLostError", nullptr,
       "The device hit an unrecoverable error; every later call on it fails."},
  };
  for (const ErrorSpec& spec : specs) {
    py::object bases = spec.extra_base
                           ? py::object(py::make_tuple(py::handle(g_error), py::handle(spec.extra_base)))
                           : py::reinterpret_borrow<py::object>(g_error);
    std::string qualified = std::string("axrt.") + spec.name;
    PyObject* cls = PyErr_NewExceptionWithDoc(qualified.c_str(), spec.doc, bases.ptr(), nullptr);
    if (!cls) throw PythonError();
    g_classes[spec.code] = cls;
    m.add_object(spec.name, py::handle(cls));
  }
}

}  // namespace axrt_py
