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

// numpy dtype objects by axrt code, kept for the life of the process (never
// destroyed: they may be needed during shutdown). numpy's own types are made
// when the module is imported (a first use from several threads would import
// numpy inside a static's initialisation, which lets go of the GIL);
// ml_dtypes' types on their first use, since importing ml_dtypes can cost
// more than the rest of `import axrt` together. Every access holds the GIL.
struct Table {
  std::array<PyObject*, kDtypeCount> numpy{};
  PyObject* by_dtype = nullptr;  // dict: numpy dtype -> axrt code
  bool ml_dtypes_added = false;  // add_ml_dtypes() ran to its end
};

Table& table() {
  static Table* t = [] {
    auto* t = new Table();
    py::module_ np = py::module_::import("numpy");
    py::dict by_dtype;
    for (const DtypeName& n : kNames) {
      if (!n.numpy) continue;
      t->numpy[n.dtype] = np.attr("dtype")(n.numpy).release().ptr();
      by_dtype[py::handle(t->numpy[n.dtype])] = py::int_(n.dtype);
    }
    t->by_dtype = by_dtype.release().ptr();
    return t;
  }();
  return *t;
}

bool is_ml_dtype(axrt_dtype_t dtype) {
  for (const DtypeName& n : kNames) {
    if (n.dtype == dtype) return n.ml_dtypes != nullptr;
  }
  return false;
}

// Adds ml_dtypes' types, when it can be imported. Two threads may both get
// here (the import lets go of the GIL); each fills only what is still empty,
// between two calls into Python, so the table never changes under a reader.
void add_ml_dtypes(Table& t) {
  if (t.ml_dtypes_added) return;
  py::module_ np = py::module_::import("numpy");
  py::object ml;
  try {
    ml = py::module_::import("ml_dtypes");
  } catch (py::error_already_set&) {
    // Absent: its types stay without a numpy dtype (numpy_dtype says so).
  }
  for (const DtypeName& n : kNames) {
    if (!ml || !n.ml_dtypes || t.numpy[n.dtype] || !py::hasattr(ml, n.ml_dtypes)) continue;
    py::object dt = np.attr("dtype")(ml.attr(n.ml_dtypes));
    py::object code = py::int_(n.dtype);
    if (t.numpy[n.dtype]) continue;
    if (PyDict_SetItem(t.by_dtype, dt.ptr(), code.ptr()) != 0) throw py::error_already_set();
    t.numpy[n.dtype] = dt.release().ptr();
  }
  t.ml_dtypes_added = true;
}

// The numpy dtype of `dtype`, or null when there is none (ml_dtypes missing).
PyObject* find_numpy_dtype(axrt_dtype_t dtype) {
  if (dtype >= kDtypeCount) return nullptr;
  Table& t = table();
  if (!t.numpy[dtype] && is_ml_dtype(dtype)) add_ml_dtypes(t);
  return t.numpy[dtype];
}

}  // namespace

py::dtype numpy_dtype(axrt_dtype_t dtype) {
  if (PyObject* dt = find_numpy_dtype(dtype)) return py::reinterpret_borrow<py::dtype>(dt);
  for (const DtypeName& n : kNames) {
    if (n.dtype == dtype && n.ml_dtypes) {
      throw py::type_error(std::string("axrt dtype ") + axrt_dtype_name(dtype) +
                           " needs the numpy dtype ml_dtypes." + n.ml_dtypes +
                           ": pip install ml_dtypes");
    }
  }
  throw py::type_error(std::string("axrt dtype ") + axrt_dtype_name(dtype) + " has no numpy dtype");
}

namespace {

// The axrt code of a numpy dtype, or null. A dtype of ml_dtypes can exist only
// once ml_dtypes is imported: its types join the table then.
PyObject* find_code(const py::handle& dtype) {
  Table& t = table();
  PyObject* code = PyDict_GetItem(t.by_dtype, dtype.ptr());
  if (!code && !t.ml_dtypes_added && PyDict_GetItemString(PyImport_GetModuleDict(), "ml_dtypes")) {
    add_ml_dtypes(t);
    code = PyDict_GetItem(t.by_dtype, dtype.ptr());
  }
  return code;
}

}  // namespace

axrt_dtype_t axrt_dtype(const py::dtype& dtype) {
  PyObject* code = find_code(dtype);
  if (!code) {
    // Byte-swapped or otherwise unusual forms of a known type.
    py::dtype native = dtype.attr("newbyteorder")("=");
    if (!dtype.attr("isnative").cast<bool>()) {
      throw py::type_error("axrt takes native-byte-order arrays; got dtype " +
                           py::str(py::handle(dtype)).cast<std::string>());
    }
    code = find_code(native);
    if (!code) {
      throw py::type_error("numpy dtype " + py::str(py::handle(dtype)).cast<std::string>() +
                           " has no axrt dtype");
    }
  }
  return static_cast<axrt_dtype_t>(PyLong_AsUnsignedLong(code));
}

void init_dtypes(py::module_& m) {
  // Every axrt dtype by its runtime name: (number, bits per element), for the
  // builder; numpy_dtype(name) gives its numpy dtype.
  table();
  py::dict dtypes;
  for (axrt_dtype_t d = 1; d < kDtypeCount; ++d) {
    dtypes[py::str(axrt_dtype_name(d))] = py::make_tuple(d, axrt_dtype_bit_width(d));
  }
  m.attr("DTYPES") = dtypes;
  m.def(
      "numpy_dtype",
      [](const std::string& name) -> py::object {
        for (axrt_dtype_t d = 1; d < kDtypeCount; ++d) {
          if (name != axrt_dtype_name(d)) continue;
          PyObject* dt = find_numpy_dtype(d);
          return dt ? py::reinterpret_borrow<py::object>(dt) : py::object(py::none());
        }
        throw py::value_error("no axrt dtype is named '" + name + "'");
      },
      py::arg("name"),
      "The numpy dtype of the axrt dtype `name` (bfloat16, fp8, fp4 and the sub-byte integers "
      "from ml_dtypes, imported on first use), or None when ml_dtypes is missing.");
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
