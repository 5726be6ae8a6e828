// The DLPack protocol both ways: Tensor.__dlpack__ / __dlpack_device__ and
// axrt.from_dlpack, over the C API's exports and imports (axrt/dlpack.h).
#include <dlpack/dlpack.h>

#include "binding.h"

namespace axrt_py {

namespace {

constexpr const char* kVersionedName = "dltensor_versioned";
constexpr const char* kUsedVersionedName = "used_dltensor_versioned";
constexpr const char* kLegacyName = "dltensor";
constexpr const char* kUsedLegacyName = "used_dltensor";

// A capsule nobody consumed frees its tensor; a consumed one (renamed) is
// the consumer's. Runs with the GIL held, possibly during shutdown.
void versioned_capsule_destructor(PyObject* capsule) {
  if (!PyCapsule_IsValid(capsule, kVersionedName)) return;
  PyObject *type, *value, *traceback;
  PyErr_Fetch(&type, &value, &traceback);
  auto* managed = static_cast<DLManagedTensorVersioned*>(PyCapsule_GetPointer(capsule, kVersionedName));
  if (managed && managed->deleter) managed->deleter(managed);
  PyErr_Restore(type, value, traceback);
}

void legacy_capsule_destructor(PyObject* capsule) {
  if (!PyCapsule_IsValid(capsule, kLegacyName)) return;
  PyObject *type, *value, *traceback;
  PyErr_Fetch(&type, &value, &traceback);
  auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, kLegacyName));
  if (managed && managed->deleter) managed->deleter(managed);
  PyErr_Restore(type, value, traceback);
}

// A producer's managed tensor (numpy, PyTorch ...) as axrt holds it: axrt
// calls the deleter from any thread, and producers' deleters may take the
// GIL, unguarded against Python's exit; theirs runs under an ExitDelay, or
// not at all once Python is exiting.
template <typename Managed>
struct ForeignLoan {
  Managed managed;  // the producer's, with this loan's deleter
  Managed* producer;

  static Managed* wrap(Managed* producer) {
    auto* loan = new ForeignLoan{*producer, producer};
    loan->managed.manager_ctx = loan;
    loan->managed.deleter = &ForeignLoan::deleter;
    return &loan->managed;
  }
  // For an import that failed: the producer's tensor stays the caller's.
  static void unwrap(Managed* managed) { delete static_cast<ForeignLoan*>(managed->manager_ctx); }

  static void deleter(Managed* self) {
    auto* loan = static_cast<ForeignLoan*>(self->manager_ctx);
    ExitDelay delay;
    if (!delay.entered()) return;
    if (loan->producer->deleter) loan->producer->deleter(loan->producer);
    delete loan;
  }
};

std::pair<int, int> tensor_dlpack_device(Tensor& t) {
  if (t.pinned() && t.device()->properties().type == AXRT_DEVICE_TYPE_CUDA) {
    return {kDLCUDAHost, 0};
  }
  return t.device()->dlpack_device();
}

// A contiguous copy of `t` on its own device, queued on `stream` (made at
// once, after the work writing `t`, for strided views of host memory).
std::shared_ptr<Tensor> clone(const std::shared_ptr<Tensor>& t, const std::shared_ptr<Stream>& stream) {
  const axrt_tensor_info_t& info = t->info();
  if (!info.contiguous) {
    if (t->device() == host_device()) return compact_host_copy(t);
    throw py::buffer_error("axrt copies memory of " + t->device()->id() +
                           " only as whole byte ranges: a strided view of it cannot be copied");
  }
  if (t->producer()) order_after(t->producer()->handle(), stream->handle(), t->producer()->device()->handle());
  Handle<axrt_tensor_t> out = allocate_like(info, *t->device());
  if (info.byte_size) {
    Handle<axrt_buffer_t> src, dst;
    check(axrt_tensor_get_buffer(t->handle(), src.out()));
    check(axrt_tensor_get_buffer(out.get(), dst.out()));
    check(axrt_stream_copy_buffer(stream->handle(), src.get(), info.byte_offset, dst.get(), 0, info.byte_size));
  }
  return std::make_shared<Tensor>(std::move(out), t->device(), stream);
}

// The protocol's `stream`: None or an int.
std::optional<int64_t> stream_number(const py::object& stream) {
  if (stream.is_none()) return std::nullopt;
  if (!py::isinstance<py::int_>(stream)) {
    throw py::type_error("the DLPack stream must be an int or None, not " +
                         py::str(py::type::handle_of(stream).attr("__name__")).cast<std::string>());
  }
  return stream.cast<int64_t>();
}

// Makes the consumer's CUDA stream (the protocol's integer) wait for the
// work that writes `t`, on the device.
void order_consumer_stream(const Tensor& t, const py::object& stream) {
  int64_t native = 1;  // None: the legacy default stream
  if (auto number = stream_number(stream)) {
    native = *number;
    if (native == -1) return;  // the consumer orders the work itself
    if (native == 0) {
      throw py::value_error("stream=0 is ambiguous in the DLPack protocol: pass 1 (legacy default "
                            "stream), 2 (per-thread default stream) or a stream handle");
    }
  }
  const auto& producer = t.producer();
  if (!producer) return;
  Handle<axrt_event_t> event;
  axrt_event_options_t options = AXRT_EVENT_OPTIONS_INIT;
  options.flags = AXRT_EVENT_FLAG_DISABLE_TIMING;
  check(axrt_event_create(producer->device()->handle(), &options, event.out()));
  check(axrt_stream_record_event(producer->handle(), event.get()));
  check(axrt_event_enqueue_native_wait(event.get(), reinterpret_cast<void*>(static_cast<intptr_t>(native))));
}

py::object dlpack(const std::shared_ptr<Tensor>& self, py::object stream, py::object max_version,
                  py::object dl_device, py::object copy) {
  const std::pair<int, int> own = tensor_dlpack_device(*self);
  std::pair<int, int> target = own;
  if (!dl_device.is_none()) target = dl_device.cast<std::pair<int, int>>();
  const bool copy_given = !copy.is_none();
  const bool must_copy = copy_given && copy.cast<bool>();
  const bool may_copy = !copy_given || must_copy;
  const bool host_memory = target.first == kDLCPU || target.first == kDLCUDAHost;
  if (host_memory) {
    if (auto number = stream_number(stream); number && *number != -1) {
      throw py::value_error("stream must be None for host memory in the DLPack protocol");
    }
  }

  std::shared_ptr<Tensor> source = self;
  bool copied = false;
  if (target != own) {
    if (target != std::pair<int, int>{kDLCPU, 0}) {
      throw py::buffer_error("axrt cannot export a tensor of " + self->device()->id() +
                             " to DLPack device (" + std::to_string(target.first) + ", " +
                             std::to_string(target.second) + ")");
    }
    if (!may_copy) {
      throw py::buffer_error("a tensor on " + self->device()->id() +
                             " reaches the CPU only by a copy, and copy=False was given");
    }
    source = tensor_to(self, host_device(), py::none());
    copied = true;
  } else if (must_copy) {
    source = clone(self, self->producer() ? self->producer() : self->device()->default_stream());
    copied = true;
  }

  if (host_memory) {
    source->synchronize();
  } else {
    order_consumer_stream(*source, stream);
  }

  const bool versioned = !max_version.is_none() && max_version.cast<std::pair<int, int>>().first >= 1;
  if (versioned) {
    DLManagedTensorVersioned* managed = nullptr;
    check(axrt_tensor_export_dlpack_versioned(source->handle(), AXRT_DLPACK_FLAG_NONE, &managed));
    if (copied) managed->flags |= DLPACK_FLAG_BITMASK_IS_COPIED;
    PyObject* capsule = PyCapsule_New(managed, kVersionedName, versioned_capsule_destructor);
    if (!capsule) {
      managed->deleter(managed);
      throw py::error_already_set();
    }
    return py::reinterpret_steal<py::object>(capsule);
  }
  if (source->read_only()) {
    throw py::buffer_error("a read-only tensor cannot be exported through legacy DLPack, which has "
                           "no read-only flag: ask for max_version=(1, 0) or later");
  }
  DLManagedTensor* managed = nullptr;
  check(axrt_tensor_export_dlpack(source->handle(), &managed));
  PyObject* capsule = PyCapsule_New(managed, kLegacyName, legacy_capsule_destructor);
  if (!capsule) {
    managed->deleter(managed);
    throw py::error_already_set();
  }
  return py::reinterpret_steal<py::object>(capsule);
}

std::shared_ptr<Device> device_of_tensor(axrt_tensor_t tensor) {
  Handle<axrt_buffer_t> buffer;
  check(axrt_tensor_get_buffer(tensor, buffer.out()));
  Handle<axrt_device_t> device;
  check(axrt_buffer_get_device(buffer.get(), device.out()));
  return device_of(device.get());
}

// The stream an import onto DLPack device `dev` orders itself by: a CUDA
// device's default stream as its native handle, None for host memory.
py::object consumer_stream(const py::object& dev) {
  if (dev.is_none()) return py::none();
  auto [type, id] = dev.cast<std::pair<int, int>>();
  if (type != kDLCUDA) return py::none();
  for (const auto& d : all_devices()) {
    if (d->properties().type == AXRT_DEVICE_TYPE_CUDA && static_cast<int>(d->properties().ordinal) == id) {
      void* native = nullptr;
      check(axrt_stream_get_native_handle(d->default_stream()->handle(), &native));
      // The protocol names the legacy default stream 1 (0 is ambiguous).
      return py::int_(native ? reinterpret_cast<uintptr_t>(native) : uintptr_t{1});
    }
  }
  return py::none();  // the import names the missing device
}

// A capsule of `obj` when it is a plain torch CPU tensor, exported by torch's
// C function instead of its Python-level __dlpack__ and __dlpack_device__,
// which cost several times the import itself (docs/performance.md,
// "PyTorch"): host memory needs no stream. Tensors that require grad, of
// other devices, and subclasses (which may override the protocol) give None:
// the protocol path then answers as torch would. Lazily negated or
// conjugated views are refused.
py::object torch_host_capsule(const py::object& obj) {
  struct Torch {
    PyTypeObject* tensor_type = nullptr;
    py::object export_capsule;
    // Interned once: attribute lookups by C string would make a new string
    // each time.
    py::str requires_grad{"requires_grad"}, is_cpu{"is_cpu"}, is_conj{"is_conj"},
        is_neg{"is_neg"};
  };
  static Torch* torch = nullptr;
  if (!torch) {
    // Only once torch is imported can `obj` be one of its tensors.
    PyObject* module = PyDict_GetItemString(PyImport_GetModuleDict(), "torch");
    if (!module) return py::none();
    auto found = std::make_unique<Torch>();
    py::module_ m = py::reinterpret_borrow<py::module_>(module);
    py::object tensor = m.attr("Tensor");
    py::object c = m.attr("_C");
    found->export_capsule = py::hasattr(c, "_to_dlpack_versioned") ? c.attr("_to_dlpack_versioned")
                                                                    : c.attr("_to_dlpack");
    found->tensor_type = reinterpret_cast<PyTypeObject*>(tensor.ptr());
    // Never destroyed: torch's objects outlive any use here.
    torch = found.release();
  }
  if (Py_TYPE(obj.ptr()) != torch->tensor_type) return py::none();
  auto flag = [&](const py::str& name) {
    py::object value = py::reinterpret_steal<py::object>(PyObject_GetAttr(obj.ptr(), name.ptr()));
    if (!value) throw py::error_already_set();
    return PyObject_IsTrue(value.ptr()) == 1;
  };
  auto method = [&](const py::str& name) {
    py::object value =
        py::reinterpret_steal<py::object>(PyObject_CallMethodNoArgs(obj.ptr(), name.ptr()));
    if (!value) throw py::error_already_set();
    return PyObject_IsTrue(value.ptr()) == 1;
  };
  // torch's own __dlpack__ (2.15) exports such views' memory without the
  // pending negation or conjugation: the values would be silently wrong.
  if (method(torch->is_neg) || method(torch->is_conj)) {
    throw py::buffer_error("the torch tensor is a lazily negated or conjugated view, whose "
                           "memory does not hold its values: call resolve_neg() or "
                           "resolve_conj() first");
  }
  if (flag(torch->requires_grad) || !flag(torch->is_cpu)) return py::none();
  return torch->export_capsule(obj);
}

}  // namespace

std::shared_ptr<Tensor> from_dlpack(py::object obj, py::object device, py::object copy) {
  std::shared_ptr<Tensor> t;
  bool copied = false;
  if (py::isinstance<Tensor>(obj)) {
    t = obj.cast<std::shared_ptr<Tensor>>();
  } else if (py::isinstance<py::array>(obj)) {
    // numpy's own arrays are lent directly: the same zero-copy import as
    // through numpy's capsule, without making one.
    t = import_numpy(py::reinterpret_borrow<py::array>(obj));
  } else if (PyCapsule_CheckExact(obj.ptr())) {
    t = import_capsule(py::reinterpret_borrow<py::capsule>(obj));
  } else if (py::object capsule = torch_host_capsule(obj); !capsule.is_none()) {
    t = import_capsule(py::reinterpret_borrow<py::capsule>(capsule));
  } else if (py::hasattr(obj, "__dlpack__")) {
    py::object dev = py::hasattr(obj, "__dlpack_device__") ? obj.attr("__dlpack_device__")() : py::object(py::none());
    py::object stream = consumer_stream(dev);
    py::object capsule;
    try {
      capsule = obj.attr("__dlpack__")(py::arg("stream") = stream, py::arg("max_version") = py::make_tuple(1, 1));
    } catch (py::error_already_set& e) {
      // Producers from before DLPack 1.0 take no max_version.
      if (!e.matches(PyExc_TypeError)) throw;
      capsule = obj.attr("__dlpack__")(py::arg("stream") = stream);
    }
    t = import_capsule(py::reinterpret_borrow<py::capsule>(capsule));
  } else if (PyObject_CheckBuffer(obj.ptr())) {
    t = import_numpy(py::module_::import("numpy").attr("asarray")(obj));
  } else {
    throw py::type_error("from_dlpack() takes an object with __dlpack__, a DLPack capsule or a buffer; got " +
                         py::repr(py::type::handle_of(obj)).cast<std::string>());
  }
  if (!device.is_none()) {
    auto d = resolve_device(device);
    if (d != t->device()) {
      if (!copy.is_none() && !copy.cast<bool>()) {
        throw py::buffer_error("the tensor is on " + t->device()->id() + "; reaching " + d->id() +
                               " needs a copy, and copy=False was given");
      }
      t = tensor_to(t, d, py::none());
      copied = true;
    }
  }
  if (!copied && !copy.is_none() && copy.cast<bool>()) {
    t = clone(t, t->producer() ? t->producer() : t->device()->default_stream());
  }
  return t;
}

std::shared_ptr<Tensor> import_capsule(const py::capsule& capsule) {
  PyObject* cap = capsule.ptr();
  Handle<axrt_tensor_t> tensor;
  if (PyCapsule_IsValid(cap, kVersionedName)) {
    using Loan = ForeignLoan<DLManagedTensorVersioned>;
    auto* managed = Loan::wrap(static_cast<DLManagedTensorVersioned*>(PyCapsule_GetPointer(cap, kVersionedName)));
    axrt_status_t status = axrt_tensor_import_dlpack_versioned(instance(), managed, tensor.out());
    if (status) Loan::unwrap(managed);
    check(status);
    PyCapsule_SetName(cap, kUsedVersionedName);
  } else if (PyCapsule_IsValid(cap, kLegacyName)) {
    using Loan = ForeignLoan<DLManagedTensor>;
    auto* managed = Loan::wrap(static_cast<DLManagedTensor*>(PyCapsule_GetPointer(cap, kLegacyName)));
    axrt_status_t status = axrt_tensor_import_dlpack(instance(), managed, tensor.out());
    if (status) Loan::unwrap(managed);
    check(status);
    PyCapsule_SetName(cap, kUsedLegacyName);
  } else {
    const char* name = PyCapsule_GetName(cap);
    PyErr_Clear();
    throw py::value_error(std::string("not an unconsumed DLPack capsule (its name is '") + (name ? name : "") +
                          "'); a capsule can be consumed once");
  }
  auto device = device_of_tensor(tensor.get());
  return std::make_shared<Tensor>(std::move(tensor), std::move(device), nullptr);
}

void init_dlpack(py::module_& m) {
  auto tensor = py::reinterpret_borrow<py::class_<Tensor, std::shared_ptr<Tensor>>>(m.attr("Tensor"));
  tensor
      .def("__dlpack__", &dlpack, py::kw_only(), py::arg("stream") = py::none(),
           py::arg("max_version") = py::none(), py::arg("dl_device") = py::none(), py::arg("copy") = py::none(),
           R"doc(Exports the tensor as a DLPack capsule (the DLPack / array API protocol).

max_version >= (1, 0) gives the versioned capsule (read-only flag, copy
flag), otherwise the legacy one (refused for read-only tensors). For CUDA
tensors `stream` is the consumer's stream (1: legacy default, 2: per-thread
default, -1: no ordering, else a CUstream), made to wait for the producing
work with an event, without blocking the host; host memory is exported once
that work completed. dl_device=(kDLCPU, 0) copies a device tensor to the host
unless copy=False; copy=True always copies (a strided view of host memory into
a compact tensor).)doc")
      .def("__dlpack_device__", &tensor_dlpack_device, "The DLPack (device_type, device_id) of the tensor's memory.");

  m.def("from_dlpack", &from_dlpack, py::arg("obj"), py::kw_only(), py::arg("device") = py::none(),
        py::arg("copy") = py::none(), R"doc(
An axrt.Tensor over the memory of `obj`, any DLPack producer (numpy, JAX,
PyTorch, CuPy, an axrt.Tensor), a DLPack capsule or a buffer, without a copy.
The producer is asked for a versioned (1.x) capsule and falls back to the
legacy one; CUDA producers order their work before the default stream of the
axrt device. The tensor keeps the producer's memory alive, and is read-only
when the producer says so. device= copies to another device when needed
(unless copy=False); copy=True always copies.)doc");
}

}  // namespace axrt_py
