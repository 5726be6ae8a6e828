// The .axe builder of axrt/format.h as the private class _axrt.AxeBuilder,
// one method per C function; axrt/builder.py is the API users see.
//
// Python values become the C descriptions here, field by field: a struct
// that starts with struct_size is a dict keyed by the C field names (absent
// keys and None keep the _INIT defaults; unknown keys are a TypeError), a
// small value struct is a tuple (a dim is (value, symbol), an expression op
// (opcode, operand)), enums and dtypes are their numbers, and payloads are
// C-contiguous buffers. Everything is borrowed for the call only: the C API
// copies it.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <deque>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "binding.h"

namespace axrt_py {
namespace {

std::string type_name(py::handle h) { return Py_TYPE(h.ptr())->tp_name; }

std::string repr_of(py::handle h) { return py::repr(h).cast<std::string>(); }

// An integer of type T; TypeError for non-integers, ValueError outside T.
template <typename T>
T to_int(py::handle h, const std::string& what) {
  static_assert(std::is_integral_v<T> && sizeof(T) <= 8);
  if (!PyIndex_Check(h.ptr())) {
    throw py::type_error(what + " must be an integer, not " + type_name(h));
  }
  py::object index = py::reinterpret_steal<py::object>(PyNumber_Index(h.ptr()));
  if (!index) throw PythonError();
  using Limits = std::numeric_limits<T>;
  const auto out_of_range = [&] {
    return py::value_error(what + " is " + repr_of(index) + ", outside [" +
                           std::to_string(Limits::min()) + ", " + std::to_string(Limits::max()) +
                           "]");
  };
  int overflow = 0;
  const long long value = PyLong_AsLongLongAndOverflow(index.ptr(), &overflow);
  if (value == -1 && PyErr_Occurred()) throw PythonError();
  if (overflow > 0 && std::is_unsigned_v<T> && sizeof(T) == 8) {
    const unsigned long long big = PyLong_AsUnsignedLongLong(index.ptr());
    if (PyErr_Occurred()) {
      PyErr_Clear();
      throw out_of_range();
    }
    return static_cast<T>(big);
  }
  if (overflow != 0) throw out_of_range();
  if constexpr (std::is_unsigned_v<T>) {
    if (value < 0 || static_cast<unsigned long long>(value) > Limits::max()) throw out_of_range();
  } else {
    if (value < Limits::min() || value > Limits::max()) throw out_of_range();
  }
  return static_cast<T>(value);
}

// The items of a list or tuple (new references).
std::vector<py::object> to_items(py::handle h, const std::string& what) {
  if (!PyList_Check(h.ptr()) && !PyTuple_Check(h.ptr())) {
    throw py::type_error(what + " must be a list or tuple, not " + type_name(h));
  }
  std::vector<py::object> items;
  const Py_ssize_t count = PySequence_Fast_GET_SIZE(h.ptr());
  items.reserve(static_cast<size_t>(count));
  for (Py_ssize_t i = 0; i < count; ++i) {
    items.push_back(py::reinterpret_borrow<py::object>(PySequence_Fast_GET_ITEM(h.ptr(), i)));
  }
  return items;
}

std::string item(const std::string& what, size_t i) {
  return what + "[" + std::to_string(i) + "]";
}

// What the pointers of one C description point to, alive for one call.
// Deques keep the addresses of their elements when they grow.
struct Keep {
  std::deque<std::string> strings;
  std::deque<std::vector<uint64_t>> u64s;
  std::deque<std::vector<int64_t>> i64s;
  std::deque<std::vector<axrt_axe_expr_op_t>> ops;
  std::deque<std::vector<axrt_axe_dim_t>> dims;
  std::deque<axrt_axe_quant_layout_t> layouts;
  std::deque<axrt_axe_binding_t> bindings;

  // A str as a NUL-terminated UTF-8 string; None (or absent) is NULL.
  const char* str(py::handle h, const std::string& what) {
    if (!h || h.is_none()) return nullptr;
    if (!PyUnicode_Check(h.ptr())) {
      throw py::type_error(what + " must be a str, not " + type_name(h));
    }
    Py_ssize_t size = 0;
    const char* text = PyUnicode_AsUTF8AndSize(h.ptr(), &size);
    if (!text) throw PythonError();
    std::string& kept = strings.emplace_back(text, static_cast<size_t>(size));
    if (kept.find('\0') != std::string::npos) {
      throw py::value_error(what + " contains a NUL character: " + repr_of(h));
    }
    return kept.c_str();
  }

  const std::vector<uint64_t>& u64_list(py::handle h, const std::string& what) {
    std::vector<uint64_t>& out = u64s.emplace_back();
    const std::vector<py::object> values = to_items(h, what);
    for (size_t i = 0; i < values.size(); ++i) {
      out.push_back(to_int<uint64_t>(values[i], item(what, i)));
    }
    return out;
  }

  const std::vector<int64_t>& i64_list(py::handle h, const std::string& what) {
    std::vector<int64_t>& out = i64s.emplace_back();
    const std::vector<py::object> values = to_items(h, what);
    for (size_t i = 0; i < values.size(); ++i) {
      out.push_back(to_int<int64_t>(values[i], item(what, i)));
    }
    return out;
  }
};

// Reads a dict standing for a C struct; finish() refuses keys never asked
// for, so a misspelt field is an error rather than a silent default.
class Fields {
 public:
  Fields(py::handle h, std::string what) : what_(std::move(what)) {
    if (!PyDict_Check(h.ptr())) {
      throw py::type_error(what_ + " must be a dict, not " + type_name(h));
    }
    dict_ = py::reinterpret_borrow<py::dict>(h);
  }

  // The value of `key` (a new reference, so that conversions calling back
  // into Python cannot free it), or a null object when it is absent or None.
  py::object get(const char* key) {
    known_.push_back(key);
    PyObject* value = PyDict_GetItemString(dict_.ptr(), key);
    if (!value || value == Py_None) return py::object();
    return py::reinterpret_borrow<py::object>(value);
  }

  template <typename T>
  T num(const char* key, T fallback) {
    const py::object value = get(key);
    return value ? to_int<T>(value, at(key)) : fallback;
  }

  std::string at(const char* key) const { return what_ + "['" + key + "']"; }

  void finish() const {
    for (const auto& [key, value] : dict_) {
      const bool known = PyUnicode_Check(key.ptr()) &&
                         std::find(known_.begin(), known_.end(), key.cast<std::string>()) !=
                             known_.end();
      if (known) continue;
      std::string names;
      for (const std::string& k : known_) names += (names.empty() ? "" : ", ") + k;
      throw py::type_error(what_ + " has no field " + repr_of(key) + "; its fields are " + names);
    }
  }

 private:
  std::string what_;
  py::dict dict_;
  std::vector<std::string> known_;
};

void to_triple(py::handle h, const std::string& what, uint32_t out[3]) {
  const std::vector<py::object> values = to_items(h, what);
  if (values.size() != 3) {
    throw py::value_error(what + " must hold 3 integers, not " + std::to_string(values.size()));
  }
  for (size_t i = 0; i < 3; ++i) out[i] = to_int<uint32_t>(values[i], item(what, i));
}

axrt_axe_packing_t to_packing(py::handle h, const std::string& what) {
  axrt_axe_packing_t packing = {0, 0, 0, 0, 0, 0};
  if (!h || h.is_none()) return packing;
  Fields f(h, what);
  packing.bits = f.num<uint32_t>("bits", packing.bits);
  packing.container_bits = f.num<uint32_t>("container_bits", packing.container_bits);
  packing.axis = f.num<int32_t>("axis", packing.axis);
  packing.order = f.num<uint32_t>("order", packing.order);
  packing.sign = f.num<uint32_t>("sign", packing.sign);
  packing.padding = f.num<uint32_t>("padding", packing.padding);
  f.finish();
  return packing;
}

axrt_axe_scale_ref_t to_scale_ref(py::handle h, const std::string& what,
                                  axrt_axe_scale_ref_t scale) {
  if (!h || h.is_none()) return scale;
  Fields f(h, what);
  scale.constant = f.num<int32_t>("constant", scale.constant);
  scale.dtype = f.num<uint32_t>("dtype", scale.dtype);
  scale.layout = f.num<uint32_t>("layout", scale.layout);
  f.finish();
  return scale;
}

axrt_axe_zero_point_t to_zero_point(py::handle h, const std::string& what,
                                    axrt_axe_zero_point_t zero_point) {
  if (!h || h.is_none()) return zero_point;
  Fields f(h, what);
  zero_point.kind = f.num<uint32_t>("kind", zero_point.kind);
  zero_point.constant = f.num<int32_t>("constant", zero_point.constant);
  zero_point.dtype = f.num<uint32_t>("dtype", zero_point.dtype);
  zero_point.packing = to_packing(f.get("packing"), f.at("packing"));
  zero_point.stored_bias = f.num<int32_t>("stored_bias", zero_point.stored_bias);
  f.finish();
  return zero_point;
}

// NULL for None (no layout).
const axrt_axe_quant_layout_t* to_layout(py::handle h, const std::string& what, Keep& keep) {
  if (!h || h.is_none()) return nullptr;
  axrt_axe_quant_layout_t& layout = keep.layouts.emplace_back();
  layout = AXRT_AXE_QUANT_LAYOUT_INIT;
  Fields f(h, what);
  layout.layout_id = keep.str(f.get("layout_id"), f.at("layout_id"));
  layout.element_type = f.num<uint32_t>("element_type", layout.element_type);
  layout.dequantized_type = f.num<uint32_t>("dequantized_type", layout.dequantized_type);
  if (const py::object block_shape = f.get("block_shape")) {
    const std::vector<uint64_t>& values = keep.u64_list(block_shape, f.at("block_shape"));
    layout.rank = values.size();
    layout.block_shape = values.data();
  }
  layout.scale = to_scale_ref(f.get("scale"), f.at("scale"), layout.scale);
  layout.zero_point = to_zero_point(f.get("zero_point"), f.at("zero_point"), layout.zero_point);
  layout.second_level_scale = to_scale_ref(f.get("second_level_scale"),
                                           f.at("second_level_scale"), layout.second_level_scale);
  if (const py::object block_shape = f.get("second_level_block_shape")) {
    const std::vector<uint64_t>& values =
        keep.u64_list(block_shape, f.at("second_level_block_shape"));
    layout.second_level_rank = values.size();
    layout.second_level_block_shape = values.data();
  }
  layout.packing = to_packing(f.get("packing"), f.at("packing"));
  f.finish();
  return &layout;
}

// A list of (opcode, operand) pairs in reverse Polish order; None or an
// empty list is the absent expression.
axrt_axe_expr_t to_expr(py::handle h, const std::string& what, Keep& keep) {
  axrt_axe_expr_t expr = {nullptr, 0};
  if (!h || h.is_none()) return expr;
  std::vector<axrt_axe_expr_op_t>& ops = keep.ops.emplace_back();
  const std::vector<py::object> items = to_items(h, what);
  for (size_t i = 0; i < items.size(); ++i) {
    const std::string at = item(what, i);
    const std::vector<py::object> pair = to_items(items[i], at);
    if (pair.size() != 2) {
      throw py::value_error(at + " must be an (opcode, operand) pair, not " + repr_of(items[i]));
    }
    ops.push_back({to_int<uint32_t>(pair[0], at + "[0]"), to_int<int64_t>(pair[1], at + "[1]")});
  }
  expr.ops = ops.data();
  expr.op_count = ops.size();
  return expr;
}

axrt_axe_binding_t to_binding(py::handle h, const std::string& what, Keep& keep) {
  axrt_axe_binding_t binding = AXRT_AXE_BINDING_INIT;
  Fields f(h, what);
  binding.kind = f.num<uint32_t>("kind", binding.kind);
  binding.index = f.num<uint32_t>("index", binding.index);
  binding.offset = f.num<uint64_t>("offset", binding.offset);
  binding.size = f.num<uint64_t>("size", binding.size);
  binding.value = to_expr(f.get("value"), f.at("value"), keep);
  f.finish();
  return binding;
}

// A binding passed by pointer (the sides of copies and fills).
const axrt_axe_binding_t* to_binding_ptr(py::handle h, const std::string& what, Keep& keep) {
  return &keep.bindings.emplace_back(to_binding(h, what, keep));
}

std::vector<axrt_axe_tensor_sig_t> to_sigs(py::handle h, const std::string& what, Keep& keep) {
  std::vector<axrt_axe_tensor_sig_t> sigs;
  const std::vector<py::object> items = to_items(h, what);
  for (size_t i = 0; i < items.size(); ++i) {
    axrt_axe_tensor_sig_t sig = AXRT_AXE_TENSOR_SIG_INIT;
    Fields f(items[i], item(what, i));
    sig.name = keep.str(f.get("name"), f.at("name"));
    sig.dtype = f.num<uint32_t>("dtype", sig.dtype);
    if (const py::object dims = f.get("dims")) {
      std::vector<axrt_axe_dim_t>& out = keep.dims.emplace_back();
      const std::vector<py::object> values = to_items(dims, f.at("dims"));
      for (size_t d = 0; d < values.size(); ++d) {
        const std::string at = item(f.at("dims"), d);
        const std::vector<py::object> pair = to_items(values[d], at);
        if (pair.size() != 2) {
          throw py::value_error(at + " must be a (value, symbol) pair, not " + repr_of(values[d]));
        }
        out.push_back(
            {to_int<uint64_t>(pair[0], at + "[0]"), to_int<int32_t>(pair[1], at + "[1]")});
      }
      sig.rank = out.size();
      sig.dims = out.data();
    }
    sig.flags = f.num<uint32_t>("flags", sig.flags);
    f.finish();
    sigs.push_back(sig);
  }
  return sigs;
}

// A C-contiguous buffer (bytes, bytearray, memoryview, a numpy array of a
// buffer-exporting dtype) held for one call.
class Bytes {
 public:
  Bytes(py::handle h, const std::string& what) {
    if (!PyObject_CheckBuffer(h.ptr())) {
      throw py::type_error(what + " must be a bytes-like object (bytes, bytearray, memoryview, "
                                  "a numpy array), not " + type_name(h));
    }
    if (PyObject_GetBuffer(h.ptr(), &view_, PyBUF_C_CONTIGUOUS) != 0) throw PythonError();
    held_ = true;
  }
  Bytes(const Bytes&) = delete;
  Bytes& operator=(const Bytes&) = delete;
  ~Bytes() {
    if (held_) PyBuffer_Release(&view_);
  }
  const void* data() const { return view_.buf; }
  size_t size() const { return static_cast<size_t>(view_.len); }

 private:
  Py_buffer view_{};
  bool held_ = false;
};

// A constant's data made by a zero-argument Python callable when the file
// is written (axrt_axe_builder_add_constant_from_source): called at the
// first read of a write, its result held (as a buffer) while the builder
// reads it, and released after the last byte, so a write holds one such
// result at a time.
class PySource {
 public:
  PySource(py::object producer, std::string name, uint64_t size)
      : producer_(std::move(producer)), name_(std::move(name)), size_(size) {}
  PySource(const PySource&) = delete;
  PySource& operator=(const PySource&) = delete;
  ~PySource() { drop(); }

  static axrt_status_t read(void* user_data, uint64_t offset, void* dst, uint64_t size) {
    auto* self = static_cast<PySource*>(user_data);
    if (!self->held_) {
      PythonScope scope;
      if (!scope.entered()) {
        return axrt_status_create(AXRT_STATUS_CODE_CANCELLED, "Python is exiting");
      }
      if (axrt_status_t status = self->produce()) return status;
    }
    // The buffer stays valid while it is held; copying needs no GIL.
    std::memcpy(dst, static_cast<const char*>(self->view_.buf) + offset, size);
    if (offset + size == self->size_) {
      PythonScope scope;
      if (scope.entered()) self->drop();
    }
    return nullptr;
  }

  // The builder drops the source with its last reference.
  static void release(void* user_data) {
    PythonScope scope;
    if (scope.entered()) delete static_cast<PySource*>(user_data);
  }

  // After a write (GIL held): lets go of a result a failed write left held,
  // and hands over what the callable raised, if it did.
  std::optional<py::error_already_set> finish_write() {
    drop();
    std::optional<py::error_already_set> error = std::move(error_);
    error_.reset();
    return error;
  }

 private:
  // Calls the producer (GIL held) and holds its result's bytes.
  axrt_status_t produce() {
    try {
      py::object result = producer_();
      if (PyObject_GetBuffer(result.ptr(), &view_, PyBUF_C_CONTIGUOUS) != 0) throw PythonError();
      result_ = std::move(result);
      held_ = true;
    } catch (py::error_already_set& e) {
      std::string text = Py_TYPE(e.value().ptr())->tp_name;
      if (PyObject* message = PyObject_Str(e.value().ptr())) {
        if (const char* utf8 = PyUnicode_AsUTF8(message)) text += std::string(": ") + utf8;
        Py_DECREF(message);
      }
      PyErr_Clear();
      error_ = std::move(e);
      return axrt_status_create(AXRT_STATUS_CODE_UNKNOWN,
                                ("the data callable of constant '" + name_ + "' raised " + text)
                                    .c_str());
    } catch (const std::exception& e) {
      return axrt_status_create(AXRT_STATUS_CODE_INTERNAL,
                                ("the data callable of constant '" + name_ + "': " + e.what())
                                    .c_str());
    }
    if (static_cast<uint64_t>(view_.len) != size_) {
      const std::string text = "the data callable of constant '" + name_ + "' returned " +
                               std::to_string(view_.len) + " bytes, but the constant holds " +
                               std::to_string(size_);
      drop();
      return axrt_status_create(AXRT_STATUS_CODE_INVALID_ARGUMENT, text.c_str());
    }
    return nullptr;
  }

  // GIL held.
  void drop() {
    if (held_) PyBuffer_Release(&view_);
    held_ = false;
    result_ = py::object();
  }

  py::object producer_;
  std::string name_;
  uint64_t size_;
  py::object result_;
  Py_buffer view_{};
  bool held_ = false;
  std::optional<py::error_already_set> error_;
};

class AxeBuilder {
 public:
  AxeBuilder(const py::str& producer_name, const py::str& producer_version) {
    Keep keep;
    axrt_axe_builder_options_t options = AXRT_AXE_BUILDER_OPTIONS_INIT;
    options.producer_name = keep.str(producer_name, "producer_name");
    options.producer_version = keep.str(producer_version, "producer_version");
    check(axrt_axe_builder_create(&options, handle_.out()));
  }

  void add_required_feature(const py::str& feature) {
    Keep keep;
    const char* name = keep.str(feature, "feature");
    run([&](axrt_axe_builder_t b) { return axrt_axe_builder_add_required_feature(b, name); });
  }

  void add_metadata(const py::str& key, const py::str& value) {
    Keep keep;
    const char* k = keep.str(key, "key");
    const char* v = keep.str(value, "value");
    run([&](axrt_axe_builder_t b) { return axrt_axe_builder_add_metadata(b, k, v); });
  }

  uint32_t add_code_object(const py::object& kind, const py::str& target, const py::object& data,
                           const py::object& library_name, const py::object& library_min_version) {
    Keep keep;
    axrt_axe_code_object_desc_t desc = AXRT_AXE_CODE_OBJECT_DESC_INIT;
    desc.kind = to_int<uint32_t>(kind, "kind");
    desc.target = keep.str(target, "target");
    std::unique_ptr<Bytes> bytes;
    if (!data.is_none()) {
      bytes = std::make_unique<Bytes>(data, "data");
      desc.data = bytes->data();
      desc.size = bytes->size();
    }
    desc.library_name = keep.str(library_name, "library_name");
    desc.library_min_version = to_int<uint32_t>(library_min_version, "library_min_version");
    uint32_t index = 0;
    run([&](axrt_axe_builder_t b) { return axrt_axe_builder_add_code_object(b, &desc, &index); });
    return index;
  }

  uint32_t add_kernel(const py::str& name, const py::object& code_object, const py::object& params,
                      const py::object& entry_symbol, const py::object& workgroup_size,
                      const py::object& dynamic_shared_memory, const py::object& cluster_dims) {
    Keep keep;
    axrt_axe_kernel_desc_t desc = AXRT_AXE_KERNEL_DESC_INIT;
    desc.name = keep.str(name, "name");
    desc.code_object = to_int<uint32_t>(code_object, "code_object");
    desc.entry_symbol = keep.str(entry_symbol, "entry_symbol");
    std::vector<axrt_axe_kernel_param_t> c_params;
    const std::vector<py::object> items = to_items(params, "params");
    for (size_t i = 0; i < items.size(); ++i) {
      axrt_axe_kernel_param_t param = AXRT_AXE_KERNEL_PARAM_INIT;
      Fields f(items[i], item("params", i));
      param.name = keep.str(f.get("name"), f.at("name"));
      param.kind = f.num<uint32_t>("kind", param.kind);
      param.scalar_type = f.num<uint32_t>("scalar_type", param.scalar_type);
      param.access = f.num<uint32_t>("access", param.access);
      param.layout = to_layout(f.get("layout"), f.at("layout"), keep);
      f.finish();
      c_params.push_back(param);
    }
    desc.params = c_params.data();
    desc.param_count = c_params.size();
    to_triple(workgroup_size, "workgroup_size", desc.workgroup_size);
    desc.dynamic_shared_memory = to_int<uint32_t>(dynamic_shared_memory, "dynamic_shared_memory");
    to_triple(cluster_dims, "cluster_dims", desc.cluster_dims);
    uint32_t index = 0;
    run([&](axrt_axe_builder_t b) { return axrt_axe_builder_add_kernel(b, &desc, &index); });
    return index;
  }

  void add_kernel_variant(const py::object& kernel, const py::object& code_object,
                          const py::object& entry_symbol, const py::object& workgroup_size,
                          const py::object& dynamic_shared_memory, const py::object& cluster_dims) {
    Keep keep;
    const uint32_t k = to_int<uint32_t>(kernel, "kernel");
    axrt_axe_kernel_variant_desc_t desc = AXRT_AXE_KERNEL_VARIANT_DESC_INIT;
    desc.code_object = to_int<uint32_t>(code_object, "code_object");
    desc.entry_symbol = keep.str(entry_symbol, "entry_symbol");
    to_triple(workgroup_size, "workgroup_size", desc.workgroup_size);
    desc.dynamic_shared_memory = to_int<uint32_t>(dynamic_shared_memory, "dynamic_shared_memory");
    to_triple(cluster_dims, "cluster_dims", desc.cluster_dims);
    run([&](axrt_axe_builder_t b) { return axrt_axe_builder_add_kernel_variant(b, k, &desc); });
  }

  uint32_t add_constant(const py::str& name, const py::object& data, const py::object& shape,
                        const py::object& dtype, const py::object& strides,
                        const py::object& alignment, const py::object& layout) {
    Keep keep;
    axrt_axe_constant_desc_t desc = AXRT_AXE_CONSTANT_DESC_INIT;
    desc.name = keep.str(name, "name");
    desc.dtype = to_int<uint32_t>(dtype, "dtype");
    const std::vector<uint64_t>& dims = keep.u64_list(shape, "shape");
    desc.rank = dims.size();
    desc.shape = dims.data();
    if (!strides.is_none()) {
      const std::vector<int64_t>& values = keep.i64_list(strides, "strides");
      if (values.size() != dims.size()) {
        throw py::value_error("strides has " + std::to_string(values.size()) +
                              " entries for a shape of rank " + std::to_string(dims.size()));
      }
      desc.strides = values.data();
    }
    desc.alignment = to_int<uint64_t>(alignment, "alignment");
    const Bytes bytes(data, "data");
    desc.data = bytes.data();
    desc.size = bytes.size();
    desc.layout = to_layout(layout, "layout", keep);
    uint32_t index = 0;
    run([&](axrt_axe_builder_t b) { return axrt_axe_builder_add_constant(b, &desc, &index); });
    return index;
  }

  // Like add_constant, with the data made by `producer` (a zero-argument
  // callable returning `size` C-contiguous bytes) when the file is written.
  uint32_t add_constant_source(const py::str& name, const py::object& producer,
                               const py::object& size, const py::object& shape,
                               const py::object& dtype, const py::object& strides,
                               const py::object& alignment, const py::object& layout) {
    if (!PyCallable_Check(producer.ptr())) {
      throw py::type_error("producer must be callable, not " + type_name(producer));
    }
    Keep keep;
    axrt_axe_constant_desc_t desc = AXRT_AXE_CONSTANT_DESC_INIT;
    desc.name = keep.str(name, "name");
    desc.dtype = to_int<uint32_t>(dtype, "dtype");
    const std::vector<uint64_t>& dims = keep.u64_list(shape, "shape");
    desc.rank = dims.size();
    desc.shape = dims.data();
    if (!strides.is_none()) {
      const std::vector<int64_t>& values = keep.i64_list(strides, "strides");
      if (values.size() != dims.size()) {
        throw py::value_error("strides has " + std::to_string(values.size()) +
                              " entries for a shape of rank " + std::to_string(dims.size()));
      }
      desc.strides = values.data();
    }
    desc.alignment = to_int<uint64_t>(alignment, "alignment");
    desc.layout = to_layout(layout, "layout", keep);
    auto source = std::make_unique<PySource>(producer, desc.name ? desc.name : "",
                                             to_int<uint64_t>(size, "size"));
    axrt_axe_data_source_t c_source = AXRT_AXE_DATA_SOURCE_INIT;
    c_source.size = to_int<uint64_t>(size, "size");
    c_source.read = &PySource::read;
    c_source.release = &PySource::release;
    c_source.user_data = source.get();
    uint32_t index = 0;
    run([&](axrt_axe_builder_t b) {
      return axrt_axe_builder_add_constant_from_source(b, &desc, &c_source, &index);
    });
    // The builder owns it now (PySource::release).
    sources_.push_back(source.release());
    return index;
  }

  void add_prepacked_copy(const py::object& constant, const py::str& target,
                          const py::str& layout_id, const py::object& data) {
    Keep keep;
    const uint32_t c = to_int<uint32_t>(constant, "constant");
    const char* t = keep.str(target, "target");
    const char* id = keep.str(layout_id, "layout_id");
    const Bytes bytes(data, "data");
    run([&](axrt_axe_builder_t b) {
      return axrt_axe_builder_add_prepacked_copy(b, c, t, id, bytes.data(), bytes.size());
    });
  }

  uint32_t add_function(const py::str& name, const py::object& symbols, const py::object& inputs,
                        const py::object& outputs, const py::object& arena_size,
                        const py::object& channels) {
    Keep keep;
    axrt_axe_function_desc_t desc = AXRT_AXE_FUNCTION_DESC_INIT;
    desc.name = keep.str(name, "name");
    std::vector<axrt_axe_symbol_t> c_symbols;
    const std::vector<py::object> items = to_items(symbols, "symbols");
    for (size_t i = 0; i < items.size(); ++i) {
      axrt_axe_symbol_t symbol = AXRT_AXE_SYMBOL_INIT;
      Fields f(items[i], item("symbols", i));
      symbol.name = keep.str(f.get("name"), f.at("name"));
      symbol.upper_bound = f.num<uint64_t>("upper_bound", symbol.upper_bound);
      f.finish();
      c_symbols.push_back(symbol);
    }
    const std::vector<axrt_axe_tensor_sig_t> c_inputs = to_sigs(inputs, "inputs", keep);
    const std::vector<axrt_axe_tensor_sig_t> c_outputs = to_sigs(outputs, "outputs", keep);
    desc.symbols = c_symbols.data();
    desc.symbol_count = c_symbols.size();
    desc.inputs = c_inputs.data();
    desc.input_count = c_inputs.size();
    desc.outputs = c_outputs.data();
    desc.output_count = c_outputs.size();
    desc.arena_size = to_int<uint64_t>(arena_size, "arena_size");
    std::vector<axrt_axe_channel_t> c_channels;
    const std::vector<py::object> channel_items = to_items(channels, "channels");
    for (size_t i = 0; i < channel_items.size(); ++i) {
      axrt_axe_channel_t channel = AXRT_AXE_CHANNEL_INIT;
      Fields f(channel_items[i], item("channels", i));
      channel.name = keep.str(f.get("name"), f.at("name"));
      channel.size = f.num<uint32_t>("size", channel.size);
      f.finish();
      c_channels.push_back(channel);
    }
    desc.channels = c_channels.data();
    desc.channel_count = c_channels.size();
    uint32_t index = 0;
    run([&](axrt_axe_builder_t b) { return axrt_axe_builder_add_function(b, &desc, &index); });
    return index;
  }

  void add_dispatch(const py::object& function, const py::object& kernel,
                    const py::object& workgroup_count_x, const py::object& workgroup_count_y,
                    const py::object& workgroup_count_z, const py::object& bindings) {
    Keep keep;
    const uint32_t f = to_int<uint32_t>(function, "function");
    axrt_axe_dispatch_desc_t desc = AXRT_AXE_DISPATCH_DESC_INIT;
    desc.kernel = to_int<uint32_t>(kernel, "kernel");
    desc.workgroup_count_x = to_expr(workgroup_count_x, "workgroup_count_x", keep);
    desc.workgroup_count_y = to_expr(workgroup_count_y, "workgroup_count_y", keep);
    desc.workgroup_count_z = to_expr(workgroup_count_z, "workgroup_count_z", keep);
    std::vector<axrt_axe_binding_t> c_bindings;
    const std::vector<py::object> items = to_items(bindings, "bindings");
    for (size_t i = 0; i < items.size(); ++i) {
      c_bindings.push_back(to_binding(items[i], item("bindings", i), keep));
    }
    desc.bindings = c_bindings.data();
    desc.binding_count = c_bindings.size();
    run([&](axrt_axe_builder_t b) { return axrt_axe_builder_add_dispatch(b, f, &desc); });
  }

  void add_copy(const py::object& function, const py::object& src, const py::object& dst,
                const py::object& length, const py::object& src_offset,
                const py::object& dst_offset) {
    Keep keep;
    const uint32_t f = to_int<uint32_t>(function, "function");
    axrt_axe_copy_desc_t desc = AXRT_AXE_COPY_DESC_INIT;
    desc.src = to_binding_ptr(src, "src", keep);
    desc.src_offset = to_expr(src_offset, "src_offset", keep);
    desc.dst = to_binding_ptr(dst, "dst", keep);
    desc.dst_offset = to_expr(dst_offset, "dst_offset", keep);
    desc.length = to_expr(length, "length", keep);
    run([&](axrt_axe_builder_t b) { return axrt_axe_builder_add_copy(b, f, &desc); });
  }

  void add_fill(const py::object& function, const py::object& target, const py::object& length,
                const py::object& pattern, const py::object& pattern_size,
                const py::object& offset) {
    Keep keep;
    const uint32_t f = to_int<uint32_t>(function, "function");
    axrt_axe_fill_desc_t desc = AXRT_AXE_FILL_DESC_INIT;
    desc.target = to_binding_ptr(target, "target", keep);
    desc.offset = to_expr(offset, "offset", keep);
    desc.length = to_expr(length, "length", keep);
    desc.pattern = to_int<uint64_t>(pattern, "pattern");
    desc.pattern_size = to_int<uint32_t>(pattern_size, "pattern_size");
    run([&](axrt_axe_builder_t b) { return axrt_axe_builder_add_fill(b, f, &desc); });
  }

  void add_collective(const py::object& function, const py::object& kind,
                      const py::object& channel, const py::object& dtype, const py::object& count,
                      const py::object& send, const py::object& recv, const py::object& op,
                      const py::object& root, const py::object& send_offset,
                      const py::object& recv_offset) {
    Keep keep;
    const uint32_t f = to_int<uint32_t>(function, "function");
    axrt_axe_collective_desc_t desc = AXRT_AXE_COLLECTIVE_DESC_INIT;
    desc.kind = to_int<uint32_t>(kind, "kind");
    desc.channel = to_int<uint32_t>(channel, "channel");
    desc.dtype = to_int<uint32_t>(dtype, "dtype");
    desc.count = to_expr(count, "count", keep);
    desc.send = to_binding_ptr(send, "send", keep);
    desc.recv = to_binding_ptr(recv, "recv", keep);
    desc.op = to_int<uint32_t>(op, "op");
    desc.root = to_int<uint32_t>(root, "root");
    desc.send_offset = to_expr(send_offset, "send_offset", keep);
    desc.recv_offset = to_expr(recv_offset, "recv_offset", keep);
    run([&](axrt_axe_builder_t b) { return axrt_axe_builder_add_collective(b, f, &desc); });
  }

  void write_file(const py::object& path) {
    py::object fspath = py::reinterpret_steal<py::object>(PyOS_FSPath(path.ptr()));
    if (!fspath) throw PythonError();
    py::object encoded = fspath;
    if (PyUnicode_Check(fspath.ptr())) {
      encoded = py::reinterpret_steal<py::object>(PyUnicode_EncodeFSDefault(fspath.ptr()));
      if (!encoded) throw PythonError();
    }
    const std::string file(PyBytes_AS_STRING(encoded.ptr()),
                           static_cast<size_t>(PyBytes_GET_SIZE(encoded.ptr())));
    if (file.find('\0') != std::string::npos) {
      throw py::value_error("path contains a NUL character: " + repr_of(fspath));
    }
    run_write([&](axrt_axe_builder_t b) { return axrt_axe_builder_write_file(b, file.c_str()); });
  }

  py::bytes write_memory() {
    void* data = nullptr;
    size_t size = 0;
    run_write(
        [&](axrt_axe_builder_t b) { return axrt_axe_builder_write_memory(b, &data, &size); });
    const std::unique_ptr<void, void (*)(void*)> owned(data, axrt_axe_memory_free);
    return py::bytes(static_cast<const char*>(data), size);
  }

 private:
  // Runs one C call with the GIL released. A builder serves one thread at a
  // time (format.h), and a released GIL lets another Python thread in, so
  // calls on one builder take turns on its mutex.
  template <typename Call>
  void run(Call&& call) {
    axrt_status_t status = nullptr;
    {
      GilRelease release;
      std::lock_guard<std::mutex> lock(mutex_);
      status = call(handle_.get());
    }
    check(status);
  }

  // run() for the writes, which call the sources' producers: an exception
  // a producer raised reaches the caller as itself, before the status it
  // turned into.
  template <typename Call>
  void run_write(Call&& call) {
    axrt_status_t status = nullptr;
    {
      GilRelease release;
      std::lock_guard<std::mutex> lock(mutex_);
      status = call(handle_.get());
    }
    std::optional<py::error_already_set> raised;
    for (PySource* source : sources_) {
      std::optional<py::error_already_set> error = source->finish_write();
      if (error && !raised) raised = std::move(error);
    }
    if (raised) {
      axrt_status_free(status);
      throw std::move(*raised);
    }
    check(status);
  }

  Handle<axrt_axe_builder_t> handle_;
  std::mutex mutex_;
  // Owned by the builder behind handle_, which outlives every use here.
  std::vector<PySource*> sources_;
};

}  // namespace

void init_builder(py::module_& m) {
  py::class_<AxeBuilder> cls(m, "AxeBuilder",
                             "axrt_axe_builder_t, one method per C function of axrt/format.h. "
                             "Private: use axrt.Builder. Structs are dicts keyed by the C "
                             "field names, dims (value, symbol) and expression ops (opcode, "
                             "operand) tuples, enums and dtypes their numbers, payloads "
                             "C-contiguous buffers; failures raise the axrt.Error of the "
                             "status.");
  // The host architecture as KERNEL_LIBRARY targets spell it: the kernel
  // name of `uname -m` ("x86_64", "aarch64"), which the runtime compares with.
  cls.attr("HOST_TARGET") = py::module_::import("platform").attr("machine")();
  cls.def(py::init<const py::str&, const py::str&>(), py::arg("producer_name") = py::str(""),
          py::arg("producer_version") = py::str(""), "axrt_axe_builder_create.")
      .def("add_required_feature", &AxeBuilder::add_required_feature, py::arg("feature"),
           "axrt_axe_builder_add_required_feature.")
      .def("add_metadata", &AxeBuilder::add_metadata, py::arg("key"), py::arg("value"),
           "axrt_axe_builder_add_metadata.")
      .def("add_code_object", &AxeBuilder::add_code_object, py::arg("kind"), py::arg("target"),
           py::arg("data") = py::none(), py::kw_only(), py::arg("library_name") = py::none(),
           py::arg("library_min_version") = 0,
           "axrt_axe_builder_add_code_object; returns the code object's index.")
      .def("add_kernel", &AxeBuilder::add_kernel, py::arg("name"), py::arg("code_object"),
           py::arg("params") = py::list(), py::kw_only(), py::arg("entry_symbol") = py::none(),
           py::arg("workgroup_size") = py::make_tuple(1, 1, 1),
           py::arg("dynamic_shared_memory") = 0, py::arg("cluster_dims") = py::make_tuple(0, 0, 0),
           "axrt_axe_builder_add_kernel; `params` are dicts of axrt_axe_kernel_param_t's "
           "fields. Returns the kernel's index.")
      .def("add_kernel_variant", &AxeBuilder::add_kernel_variant, py::arg("kernel"),
           py::arg("code_object"), py::kw_only(), py::arg("entry_symbol") = py::none(),
           py::arg("workgroup_size") = py::make_tuple(1, 1, 1),
           py::arg("dynamic_shared_memory") = 0, py::arg("cluster_dims") = py::make_tuple(0, 0, 0),
           "axrt_axe_builder_add_kernel_variant.")
      .def("add_constant", &AxeBuilder::add_constant, py::arg("name"), py::arg("data"),
           py::arg("shape"), py::arg("dtype"), py::kw_only(), py::arg("strides") = py::none(),
           py::arg("alignment") = 0, py::arg("layout") = py::none(),
           "axrt_axe_builder_add_constant; `layout` is a dict of axrt_axe_quant_layout_t's "
           "fields (its rank is block_shape's length). Returns the constant's index.")
      .def("add_constant_source", &AxeBuilder::add_constant_source, py::arg("name"),
           py::arg("producer"), py::arg("size"), py::arg("shape"), py::arg("dtype"),
           py::kw_only(), py::arg("strides") = py::none(), py::arg("alignment") = 0,
           py::arg("layout") = py::none(),
           "axrt_axe_builder_add_constant_from_source: `producer` is called with no arguments "
           "when the file is written, once per write, and returns `size` C-contiguous bytes "
           "(a buffer), released once written. Returns the constant's index.")
      .def("add_prepacked_copy", &AxeBuilder::add_prepacked_copy, py::arg("constant"),
           py::arg("target"), py::arg("layout_id"), py::arg("data"),
           "axrt_axe_builder_add_prepacked_copy.")
      .def("add_function", &AxeBuilder::add_function, py::arg("name"),
           py::arg("symbols") = py::list(), py::arg("inputs") = py::list(),
           py::arg("outputs") = py::list(), py::kw_only(), py::arg("arena_size") = 0,
           py::arg("channels") = py::list(),
           "axrt_axe_builder_add_function; symbols are dicts {name, upper_bound}, inputs and "
           "outputs dicts {name, dtype, dims} with dims (value, symbol) pairs, channels dicts "
           "{name, size}. Returns the function's index.")
      .def("add_dispatch", &AxeBuilder::add_dispatch, py::arg("function"), py::arg("kernel"),
           py::arg("workgroup_count_x"), py::arg("workgroup_count_y") = py::none(),
           py::arg("workgroup_count_z") = py::none(), py::arg("bindings") = py::list(),
           "axrt_axe_builder_add_dispatch; expressions are lists of (opcode, operand) pairs, "
           "bindings dicts of axrt_axe_binding_t's fields.")
      .def("add_copy", &AxeBuilder::add_copy, py::arg("function"), py::arg("src"),
           py::arg("dst"), py::arg("length"), py::kw_only(), py::arg("src_offset") = py::none(),
           py::arg("dst_offset") = py::none(), "axrt_axe_builder_add_copy.")
      .def("add_fill", &AxeBuilder::add_fill, py::arg("function"), py::arg("target"),
           py::arg("length"), py::arg("pattern") = 0, py::arg("pattern_size") = 1, py::kw_only(),
           py::arg("offset") = py::none(), "axrt_axe_builder_add_fill.")
      .def("add_collective", &AxeBuilder::add_collective, py::arg("function"), py::arg("kind"),
           py::arg("channel"), py::arg("dtype"), py::arg("count"), py::arg("send"),
           py::arg("recv"), py::kw_only(), py::arg("op") = 0, py::arg("root") = 0,
           py::arg("send_offset") = py::none(), py::arg("recv_offset") = py::none(),
           "axrt_axe_builder_add_collective.")
      .def("write_file", &AxeBuilder::write_file, py::arg("path"),
           "axrt_axe_builder_write_file (GIL released); `path` is a str, bytes or os.PathLike.")
      .def("write_memory", &AxeBuilder::write_memory,
           "axrt_axe_builder_write_memory (GIL released): the file as bytes.");
}

}  // namespace axrt_py
