// axrt.Tensor, its numpy and buffer-protocol views, axrt.empty/asarray, and
// how call arguments become axrt tensors.
#include <dlpack/dlpack.h>

#include <cstring>

#include "binding.h"

namespace axrt_py {
namespace {

// A numpy array lent to axrt as a DLPack tensor: the array stays alive (and
// cannot be resized) until axrt calls the deleter, from any thread.
struct ArrayLoan {
  DLManagedTensorVersioned managed{};
  PyObject* array = nullptr;
  int64_t shape[AXRT_TENSOR_MAX_RANK];
  int64_t strides[AXRT_TENSOR_MAX_RANK];

  static void deleter(DLManagedTensorVersioned* self) {
    auto* loan = static_cast<ArrayLoan*>(self->manager_ctx);
    // The scope takes the GIL only where Python's exit waits for it (a plain
    // check before PyGILState_Ensure() races with the exit); once Python is
    // exiting, the array is left to the process's end.
    PythonScope python;
    if (!python.entered()) return;
    Py_DECREF(loan->array);
    delete loan;
  }
};

// Releases a tensor once a stream reaches this point (what a host copy
// reads must live until the copy ran).
axrt_status_t release_tensor_when_reached(void* user_data, axrt_status_t) {
  axrt_tensor_release(static_cast<axrt_tensor_t>(user_data));
  return nullptr;
}

py::array contiguous(const py::array& array) {
  return py::module_::import("numpy").attr("ascontiguousarray")(array);
}

bool dense_row_major(const py::array& array) {
  return (array.flags() & py::array::c_style) != 0;
}

// A new contiguous tensor on `device` holding a copy of host tensor `host`
// (host-visible memory), queued on `stream`.
Handle<axrt_tensor_t> upload(axrt_tensor_t host, const axrt_tensor_info_t& info,
                             const std::shared_ptr<Device>& device, const std::shared_ptr<Stream>& stream) {
  if (!info.contiguous) {
    throw py::value_error("only contiguous host tensors can be copied to " + device->id());
  }
  Handle<axrt_tensor_t> out = allocate_like(info, *device);
  if (info.byte_size == 0) return out;
  Handle<axrt_buffer_t> src_buffer, dst_buffer;
  check(axrt_tensor_get_buffer(host, src_buffer.out()));
  check(axrt_tensor_get_buffer(out.get(), dst_buffer.out()));
  void* src = nullptr;
  check(axrt_buffer_map(src_buffer.get(), &src));
  check(axrt_stream_copy_from_host(stream->handle(), static_cast<char*>(src) + info.byte_offset,
                                   dst_buffer.get(), 0, info.byte_size));
  axrt_tensor_retain(host);
  axrt_status_t status = axrt_stream_launch_host_func(stream->handle(), release_tensor_when_reached, host);
  if (status) axrt_tensor_release(host);
  check(status);
  return out;
}

std::string shape_string(const Tensor& t) {
  std::string s = "[";
  for (uint32_t i = 0; i < t.info().rank; ++i) {
    if (i) s += ", ";
    s += std::to_string(t.info().shape[i]);
  }
  return s + "]";
}

}  // namespace

Tensor::Tensor(Handle<axrt_tensor_t> handle, std::shared_ptr<Device> device, std::shared_ptr<Stream> producer)
    : handle_(std::move(handle)), device_(std::move(device)), producer_(std::move(producer)) {
  check(axrt_tensor_query_info(handle_.get(), &info_));
}

const axrt_buffer_info_t& Tensor::buffer_facts() {
  if (!have_buffer_facts_) {
    Handle<axrt_buffer_t> buffer;
    check(axrt_tensor_get_buffer(handle_.get(), buffer.out()));
    check(axrt_buffer_query_info(buffer.get(), &buffer_info_));
    have_buffer_facts_ = true;
  }
  return buffer_info_;
}

void Tensor::set_producer(std::shared_ptr<Stream> producer) {
  std::lock_guard<std::mutex> lock(mutex_);
  producer_ = std::move(producer);
}

void Tensor::synchronize() {
  std::shared_ptr<Stream> producer;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    producer = producer_;
  }
  if (!producer) return;
  producer->synchronize();
  std::lock_guard<std::mutex> lock(mutex_);
  if (producer_ == producer) producer_.reset();
}

char* Tensor::host_data() {
  Handle<axrt_buffer_t> buffer;
  check(axrt_tensor_get_buffer(handle_.get(), buffer.out()));
  void* base = nullptr;
  check(axrt_buffer_map(buffer.get(), &base));
  return static_cast<char*>(base) + info_.byte_offset;
}

Handle<axrt_tensor_t> allocate_like(const axrt_tensor_info_t& info, const Device& device) {
  axrt_tensor_desc_t desc = AXRT_TENSOR_DESC_INIT;
  desc.dtype = info.dtype;
  desc.rank = info.rank;
  desc.shape = info.shape;
  Handle<axrt_tensor_t> out;
  check(axrt_tensor_allocate(device.handle(), &desc, nullptr, out.out()));
  return out;
}

Handle<axrt_tensor_t> lend_numpy(const py::array& array) {
  const axrt_dtype_t dtype = axrt_dtype(array.dtype());
  if (axrt_dtype_bit_width(dtype) < 8) {
    throw py::type_error(std::string("numpy holds ") + axrt_dtype_name(dtype) +
                         " one element per byte, axrt packs them: pass packed bytes as uint8");
  }
  const auto rank = static_cast<size_t>(array.ndim());
  if (rank > AXRT_TENSOR_MAX_RANK) {
    throw py::value_error("arrays of rank " + std::to_string(rank) + " exceed axrt's limit of " +
                          std::to_string(AXRT_TENSOR_MAX_RANK));
  }
  auto* loan = new ArrayLoan();
  const auto itemsize = static_cast<int64_t>(array.itemsize());
  for (size_t i = 0; i < rank; ++i) {
    loan->shape[i] = array.shape(i);
    const int64_t stride = array.strides(i);
    if (stride % itemsize != 0) {
      delete loan;
      throw py::value_error("array strides that are not whole elements cannot be shared");
    }
    loan->strides[i] = stride / itemsize;
  }
  DLManagedTensorVersioned& m = loan->managed;
  m.version = {AXRT_DLPACK_MAJOR_VERSION, AXRT_DLPACK_MINOR_VERSION};
  m.manager_ctx = loan;
  m.deleter = &ArrayLoan::deleter;
  m.flags = array.writeable() ? 0 : DLPACK_FLAG_BITMASK_READ_ONLY;
  DLTensor& dl = m.dl_tensor;
  dl.data = const_cast<void*>(array.data());
  dl.device = {kDLCPU, 0};
  dl.ndim = static_cast<int32_t>(rank);
  axrt_status_t dtype_status = axrt_dtype_to_dlpack(dtype, &dl.dtype);
  if (dtype_status) {
    delete loan;
    check(dtype_status);
  }
  dl.shape = loan->shape;
  dl.strides = loan->strides;
  dl.byte_offset = 0;
  loan->array = array.inc_ref().ptr();

  Handle<axrt_tensor_t> tensor;
  axrt_status_t status = axrt_tensor_import_dlpack_versioned(instance(), &m, tensor.out());
  if (status) {
    Py_DECREF(loan->array);
    delete loan;
    check(status);
  }
  return tensor;
}

std::shared_ptr<Tensor> import_numpy(const py::array& array) {
  return std::make_shared<Tensor>(lend_numpy(array), host_device(), nullptr);
}

std::shared_ptr<Tensor> to_tensor(const py::handle& obj, const std::shared_ptr<Device>& device,
                                  const std::shared_ptr<Stream>& stream, bool writable, axrt_dtype_t dtype,
                                  const char* writable_what) {
  std::shared_ptr<Tensor> t;
  if (py::isinstance<Tensor>(obj)) {
    t = obj.cast<std::shared_ptr<Tensor>>();
  } else if (py::isinstance<py::array>(obj)) {
    py::array array = py::reinterpret_borrow<py::array>(obj);
    if (!dense_row_major(array) && !writable) array = contiguous(array);
    t = import_numpy(array);
  } else if (py::hasattr(obj, "__dlpack__")) {
    t = from_dlpack(py::reinterpret_borrow<py::object>(obj), py::none(), py::none());
    // As for numpy arrays: a strided view in host memory is read through a
    // compact copy, since functions take contiguous tensors.
    if (!writable && !t->info().contiguous && t->device() == host_device()) {
      t = compact_host_copy(t);
    }
  } else {
    py::object as_dtype = dtype == AXRT_DTYPE_INVALID ? py::object(py::none()) : py::object(numpy_dtype(dtype));
    py::array array = py::module_::import("numpy").attr("asarray")(obj, as_dtype);
    if (!dense_row_major(array) && !writable) array = contiguous(array);
    t = import_numpy(array);
  }
  if (t->device() == device) {
    if (t->producer()) {
      order_after(t->producer()->handle(), stream->handle(), t->producer()->device()->handle());
    }
    return t;
  }
  if (writable) {
    throw py::value_error(std::string(writable_what) + " on " + t->device()->id() +
                          " cannot take results of work on " + device->id());
  }
  if (!t->host_visible()) {
    throw py::value_error("a tensor on " + t->device()->id() + " cannot be passed to work on " +
                          device->id() + ": move it first with .to(device)");
  }
  t->synchronize();
  return std::make_shared<Tensor>(upload(t->handle(), t->info(), device, stream), device, stream);
}

py::array tensor_numpy(const std::shared_ptr<Tensor>& self) {
  const axrt_tensor_info_t& info = self->info();
  if (axrt_dtype_bit_width(info.dtype) < 8) {
    throw py::type_error(std::string("numpy has no packed ") + axrt_dtype_name(info.dtype) +
                         " arrays: exchange the tensor through DLPack");
  }
  py::dtype dt = numpy_dtype(info.dtype);
  const auto itemsize = static_cast<int64_t>(dt.itemsize());
  std::vector<py::ssize_t> shape(info.shape, info.shape + info.rank);
  if (self->host_visible()) {
    self->synchronize();
    std::vector<py::ssize_t> strides(info.rank);
    for (uint32_t i = 0; i < info.rank; ++i) strides[i] = info.strides[i] * itemsize;
    char* data = info.element_count ? self->host_data() : nullptr;
    py::array view(dt, shape, strides, data, py::cast(self));
    if (self->read_only()) {
      view.attr("flags").attr("writeable") = false;
    }
    return view;
  }
  if (!info.contiguous) {
    throw py::value_error("only contiguous device tensors can be copied to numpy");
  }
  py::array out(dt, shape);
  if (info.byte_size == 0) return out;
  auto stream = self->producer() ? self->producer() : self->device()->default_stream();
  Handle<axrt_buffer_t> buffer;
  check(axrt_tensor_get_buffer(self->handle(), buffer.out()));
  check(axrt_stream_copy_to_host(stream->handle(), buffer.get(), info.byte_offset, out.mutable_data(),
                                 info.byte_size));
  stream->synchronize();
  return out;
}

std::shared_ptr<Tensor> compact_host_copy(const std::shared_ptr<Tensor>& t) {
  // numpy copies any strides (zero strides of broadcast views included) into
  // a new writable array.
  py::array copy = py::module_::import("numpy").attr("array")(tensor_numpy(t), py::arg("order") = "C");
  return import_numpy(copy);
}

std::shared_ptr<Tensor> tensor_to(const std::shared_ptr<Tensor>& self, const std::shared_ptr<Device>& device,
                                  const py::object& stream_arg) {
  if (self->device() == device) return self;
  if (self->host_visible()) {
    auto stream = resolve_stream(stream_arg, device);
    // Copies move whole byte ranges: a strided view goes through a compact
    // one.
    const bool strided = !self->info().contiguous && self->device() == host_device();
    auto source = strided ? compact_host_copy(self) : self;
    source->synchronize();
    Handle<axrt_tensor_t> copy = upload(source->handle(), source->info(), device, stream);
    return std::make_shared<Tensor>(std::move(copy), device, stream);
  }
  if (!device->host_accessible()) {
    return tensor_to(tensor_to(self, host_device(), py::none()), device, stream_arg);
  }
  const axrt_tensor_info_t& info = self->info();
  if (!info.contiguous) throw py::value_error("only contiguous device tensors can be copied");
  auto stream = resolve_stream(stream_arg, self->device());
  if (self->producer()) order_after(self->producer()->handle(), stream->handle(), self->device()->handle());
  auto result = std::make_shared<Tensor>(allocate_like(info, *device), device, stream);
  if (info.byte_size) {
    Handle<axrt_buffer_t> src;
    check(axrt_tensor_get_buffer(self->handle(), src.out()));
    check(axrt_stream_copy_to_host(stream->handle(), src.get(), info.byte_offset, result->host_data(),
                                   info.byte_size));
    // The source must outlive the copy.
    axrt_tensor_retain(self->handle());
    axrt_status_t status = axrt_stream_launch_host_func(stream->handle(), release_tensor_when_reached,
                                                        self->handle());
    if (status) axrt_tensor_release(self->handle());
    check(status);
  }
  return result;
}

void init_tensor(py::module_& m) {
  py::class_<Tensor, std::shared_ptr<Tensor>>(m, "Tensor", py::buffer_protocol(), R"doc(
A typed, shaped view of memory on one device: what calls return, and what
DLPack consumers (numpy, JAX, PyTorch) take without a copy. Work that writes
a tensor may still be queued when it is returned; reading it on the host
(numpy(), the buffer protocol, DLPack to the CPU) waits for that work.)doc")
      .def_property_readonly(
          "shape", [](const Tensor& t) { return py::tuple(py::cast(t.shape())); }, "The extents, a tuple of ints.")
      .def_property_readonly(
          "dtype", [](const Tensor& t) { return numpy_dtype(t.info().dtype); },
          "The element type as a numpy dtype (bfloat16 and fp8 from ml_dtypes).")
      .def_property_readonly(
          "dtype_name", [](const Tensor& t) { return std::string(axrt_dtype_name(t.info().dtype)); },
          "The element type's axrt name: 'f32', 'bf16', 'int4' ...")
      .def_property_readonly(
          "strides",
          [](const Tensor& t) {
            return py::tuple(py::cast(std::vector<int64_t>(t.info().strides, t.info().strides + t.info().rank)));
          },
          "Strides in elements (not bytes), as DLPack counts them.")
      .def_property_readonly("ndim", [](const Tensor& t) { return t.info().rank; }, "The rank.")
      .def_property_readonly("size", [](const Tensor& t) { return t.info().element_count; }, "The element count.")
      .def_property_readonly(
          "nbytes", [](const Tensor& t) { return t.info().byte_size; }, "Bytes of the elements.")
      .def_property_readonly("device", &Tensor::device, "The axrt.Device holding the memory.")
      .def_property_readonly("read_only", &Tensor::read_only,
                             "True for tensors imported read-only: they cannot be written or be out=.")
      .def_property_readonly("is_contiguous", [](const Tensor& t) { return t.info().contiguous; },
                             "True when row-major without gaps.")
      .def("numpy", &tensor_numpy, R"doc(
The tensor as a numpy array, after the work writing it completed: a view
without a copy where the memory is host-visible (the CPU device; read-only
for read-only tensors), a copy otherwise.)doc")
      .def(
          "__array__",
          [](const std::shared_ptr<Tensor>& self, py::object dtype, py::object copy) -> py::object {
            const bool visible = self->host_visible();
            if (!copy.is_none() && !copy.cast<bool>() && !visible) {
              throw py::value_error("a tensor on " + self->device()->id() +
                                    " cannot become a numpy array without a copy");
            }
            py::object array = tensor_numpy(self);
            const bool must_copy = !copy.is_none() && copy.cast<bool>() && visible;
            if (!dtype.is_none()) {
              return array.attr("astype")(dtype, py::arg("copy") = must_copy);
            }
            return must_copy ? array.attr("copy")() : array;
          },
          py::arg("dtype") = py::none(), py::kw_only(), py::arg("copy") = py::none(),
          "numpy's conversion protocol: np.asarray(tensor).")
      .def(
          "to",
          [](const std::shared_ptr<Tensor>& self, py::object device, py::object stream) {
            return tensor_to(self, resolve_device(device), stream);
          },
          py::arg("device"), py::kw_only(), py::arg("stream") = py::none(),
          "This tensor on `device`: itself when already there, else a copy queued on `stream` (None: "
          "the default stream of the device doing the copy).")
      .def("synchronize", &Tensor::synchronize, "Waits for the queued work that writes the tensor.")
      .def("__len__",
           [](const Tensor& t) {
             if (t.info().rank == 0) throw py::type_error("len() of a 0-d tensor");
             return t.info().shape[0];
           })
      .def("__repr__",
           [](const Tensor& t) {
             return "<axrt.Tensor " + std::string(axrt_dtype_name(t.info().dtype)) + shape_string(t) + " on " +
                    t.device()->id() + (t.read_only() ? " read-only>" : ">");
           })
      .def_buffer([](Tensor& tensor) {
        Tensor* self = &tensor;
        const axrt_tensor_info_t& info = self->info();
        if (!self->host_visible()) {
          throw py::buffer_error("a tensor on " + self->device()->id() + " is not in host memory");
        }
        if (axrt_dtype_bit_width(info.dtype) < 8) {
          throw py::buffer_error(std::string(axrt_dtype_name(info.dtype)) + " has no buffer format");
        }
        py::dtype dt = numpy_dtype(info.dtype);
        const char kind = dt.kind();
        // ml_dtypes' types have no PEP 3118 format, whatever their kind (that
        // of float8_e5m2 is 'f').
        const bool numpy_builtin = dt.attr("isbuiltin").cast<int>() == 1;
        if (!numpy_builtin || (kind != 'b' && kind != 'i' && kind != 'u' && kind != 'f')) {
          throw py::buffer_error(std::string(axrt_dtype_name(info.dtype)) +
                                 " has no buffer format: use numpy() or DLPack");
        }
        self->synchronize();
        const auto itemsize = static_cast<py::ssize_t>(dt.itemsize());
        std::vector<py::ssize_t> shape(info.shape, info.shape + info.rank);
        std::vector<py::ssize_t> strides(info.rank);
        for (uint32_t i = 0; i < info.rank; ++i) strides[i] = info.strides[i] * itemsize;
        std::string format(1, dt.attr("char").cast<std::string>()[0]);
        return py::buffer_info(info.element_count ? self->host_data() : nullptr, itemsize, format,
                               static_cast<py::ssize_t>(info.rank), shape, strides, self->read_only());
      });

  m.def(
      "empty",
      [](std::vector<int64_t> shape, py::object dtype, py::object device) {
        auto d = resolve_device(device);
        axrt_tensor_desc_t desc = AXRT_TENSOR_DESC_INIT;
        desc.dtype = parse_dtype(dtype);
        desc.rank = static_cast<uint32_t>(shape.size());
        desc.shape = shape.data();
        Handle<axrt_tensor_t> t;
        check(axrt_tensor_allocate(d->handle(), &desc, nullptr, t.out()));
        return std::make_shared<Tensor>(std::move(t), d, nullptr);
      },
      py::arg("shape"), py::arg("dtype") = "f32", py::kw_only(), py::arg("device") = py::none(),
      "A new contiguous tensor of uninitialised memory on `device` (None: the default device); "
      "`dtype` is an axrt name ('f32', 'bf16') or a numpy dtype.");
  m.def(
      "asarray",
      [](py::object obj, py::object device, py::object stream) {
        auto d = resolve_device(device);
        auto s = resolve_stream(stream, d);
        return to_tensor(obj, d, s, false);
      },
      py::arg("obj"), py::kw_only(), py::arg("device") = py::none(), py::arg("stream") = py::none(),
      R"doc(`obj` (an axrt.Tensor, numpy array, DLPack producer or anything numpy.asarray
takes) as a tensor on `device` (None: the default device): without a copy when
its memory is already there, else copied in the order of `stream`. Strided
views of host arrays and DLPack producers are copied to compact tensors.)doc");
}

}  // namespace axrt_py
