// Element types between axrt and numpy. bfloat16, the fp8 and fp4 formats
// and the sub-byte integers are ml_dtypes' numpy dtypes.
#include <array>
#include <string>

#include "binding.h"

namespace axrt_py {
namespace {

struct DtypeName {
  axrt_dtype_t dtype;
  const char* numpy;     // a numpy dtype name, or null
  const char* ml_dtypes; // an ml_dtypes attribute, or null
};

constexpr DtypeName kNames[] = {
    {AXRT_DTYPE_BOOL, "bool", nullptr},
    {AXRT_DTYPE_INT8, "int8", nullptr},
    {AXRT_DTYPE_UINT8, "uint8", nullptr},
    {AXRT_DTYPE_INT16, "int16", nullptr},
    {AXRT_DTYPE_UINT16, "uint16", nullptr},
    {AXRT_DTYPE_INT32, "int32", nullptr},
    {AXRT_DTYPE_UINT32, "uint32", nullptr},
    {AXRT_DTYPE_INT64, "int64", nullptr},
    {AXRT_DTYPE_UINT64, "uint64", nullptr},
    {AXRT_DTYPE_FLOAT16, "float16", nullptr},
    {AXRT_DTYPE_BFLOAT16, nullptr, "bfloat16"},
    {AXRT_DTYPE_FLOAT32, "float32", nullptr},
    {AXRT_DTYPE_FLOAT64, "float64", nullptr},
    {AXRT_DTYPE_INT4, nullptr, "int4"},
    {AXRT_DTYPE_UINT4, nullptr, "uint4"},
    {AXRT_DTYPE_INT2, nullptr, "int2"},
    {AXRT_DTYPE_UINT2, nullptr, "uint2"},
    {AXRT_DTYPE_FLOAT8_E4M3FN, nullptr, "float8_e4m3fn"},
    {AXRT_DTYPE_FLOAT8_E5M2, nullptr, "float8_e5m2"},
    {AXRT_DTYPE_FLOAT8_E4M3FNUZ, nullptr, "float8_e4m3fnuz"},
    {AXRT_DTYPE_FLOAT8_E5M2FNUZ, nullptr, "float8_e5m2fnuz"},
    {AXRT_DTYPE_FLOAT4_E2M1, nullptr, "float4_e2m1fn"},
    {AXRT_DTYPE_FLOAT8_E8M0FNU, nullptr, "float8_e8m0fnu"},
};

constexpr size_t kDtypeCount = AXRT_DTYPE_FLOAT8_E8M0FNU + 1;

// numpy dtype objects by axrt code, made when the module is imported (a
// first use from several threads would import numpy inside a static's
// initialisation, which lets go of the GIL) and kept for the life of the
// process (never destroyed: they may be needed during shutdown).
struct Table {
  std::array<PyObject*, kDtypeCount> numpy{};
  PyObject* by_dtype = nullptr;  // dict: numpy dtype -> axrt code
};

Table& table() {
  static Table* t = [] {
    auto* t = new Table();
    py::module_ np = py::module_::import("numpy");
    py::object ml;
    try {
      ml = py::module_::import("ml_dtypes");
    } catch (py::error_already_set&) {
      PyErr_Clear();
    }
    py::dict by_dtype;
    for (const DtypeName& n : kNames) {
      py::object dt;
      if (n.numpy) {
        dt = np.attr("dtype")(n.numpy);
      } else if (ml && py::hasattr(ml, n.ml_dtypes)) {
        dt = np.attr("dtype")(ml.attr(n.ml_dtypes));
      } else {
        continue;
      }
      t->numpy[n.dtype] = dt.release().ptr();
      by_dtype[py::handle(t->numpy[n.dtype])] = py::int_(n.dtype);
    }
    t->by_dtype = by_dtype.release().ptr();
    return t;
  }();
  return *t;
}

}  // namespace

py::dtype numpy_dtype(axrt_dtype_t dtype) {
  if (dtype < kDtypeCount) {
    if (PyObject* dt = table().numpy[dtype]) return py::reinterpret_borrow<py::dtype>(dt);
  }
  for (const DtypeName& n : kNames) {
    if (n.dtype == dtype && n.ml_dtypes) {
      throw py::type_error(std::string("axrt dtype ") + axrt_dtype_name(dtype) +
                           " needs the numpy dtype ml_dtypes." + n.ml_dtypes +
                           ": pip install ml_dtypes");
    }
  }
  throw py::type_error(std::string("axrt dtype ") + axrt_dtype_name(dtype) + " has no numpy dtype");
}

axrt_dtype_t axrt_dtype(const py::dtype& dtype) {
  PyObject* code = PyDict_GetItem(table().by_dtype, dtype.ptr());
  if (!code) {
    // Byte-swapped or otherwise unusual forms of a known type.
    py::dtype native = dtype.attr("newbyteorder")("=");
    if (!dtype.attr("isnative").cast<bool>()) {
      throw py::type_error("axrt takes native-byte-order arrays; got dtype " +
                           py::str(dtype).cast<std::string>());
    }
    code = PyDict_GetItem(table().by_dtype, native.ptr());
    if (!code) {
      throw py::type_error("numpy dtype " + py::str(dtype).cast<std::string>() +
                           " has no axrt dtype");
    }
  }
  return static_cast<axrt_dtype_t>(PyLong_AsUnsignedLong(code));
}

void init_dtypes(py::module_& m) {
  // Every axrt dtype by its runtime name: (number, bits per element, numpy
  // dtype or None without ml_dtypes), for the builder.
  py::dict dtypes;
  for (axrt_dtype_t d = 1; d < kDtypeCount; ++d) {
    PyObject* numpy = table().numpy[d];
    dtypes[py::str(axrt_dtype_name(d))] =
        py::make_tuple(d, axrt_dtype_bit_width(d), numpy ? py::handle(numpy) : py::handle(Py_None));
  }
  m.attr("DTYPES") = dtypes;
}

axrt_dtype_t parse_dtype(const py::handle& dtype) {
  if (py::isinstance<py::str>(dtype)) {
    const std::string name = dtype.cast<std::string>();
    for (axrt_dtype_t d = 1; d < kDtypeCount; ++d) {
      if (name == axrt_dtype_name(d)) return d;
    }
  }
  py::dtype dt;
  try {
    dt = py::dtype::from_args(py::reinterpret_borrow<py::object>(dtype));
  } catch (py::error_already_set& e) {
    throw py::type_error("not a dtype: " + py::repr(dtype).cast<std::string>());
  }
  return axrt_dtype(dt);
}

}  // namespace axrt_py
