// What the files of the extension module share: the process-wide runtime
// (one axrt instance and its devices), the wrapper objects Python sees, and
// each file's init_<area>().
#ifndef AXRT_PYTHON_BINDING_H_
#define AXRT_PYTHON_BINDING_H_

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "axrt/axrt.h"
#include "handles.h"
#include "status.h"

namespace axrt_py {

namespace py = pybind11;

// ---------------------------------------------------------------------------
// Interpreter exit
//
// Once Python finalizes, CPython forces out with pthread_exit any thread but
// the finalizing one that takes the GIL, and that unwinding aborts the
// process where it crosses a noexcept frame. Threads reach the GIL here in two
// ways: axrt's threads (stream workers, CUDA callbacks) releasing what Python
// lent, and Python threads coming back from a blocking call. Both go through
// the classes below; an atexit hook (init_exit) stops new entries and waits
// for those already past the check, before finalization begins.

// While one lives, Python's exit waits for it, unless the exit already
// began: then `entered()` is false and Python must not be touched. For code
// that takes the GIL itself (the deleters of other DLPack producers).
class ExitDelay {
 public:
  ExitDelay();
  ~ExitDelay();
  ExitDelay(const ExitDelay&) = delete;
  ExitDelay& operator=(const ExitDelay&) = delete;
  bool entered() const { return entered_; }

 private:
  bool entered_ = false;
};

// Holds the GIL on any thread, unless Python is exiting: then `entered()` is
// false, and the caller leaves its Python objects to the process's end.
class PythonScope {
 public:
  PythonScope();
  ~PythonScope();
  PythonScope(const PythonScope&) = delete;
  PythonScope& operator=(const PythonScope&) = delete;
  bool entered() const { return delay_.entered(); }

 private:
  ExitDelay delay_;  // made before the GIL is taken, gone after it is given back
  PyGILState_STATE gil_{};
};

// Releases the GIL around a call that may block (py::gil_scoped_release's
// role). A thread other than the finalizing one that comes back once Python
// is exiting sleeps until the process ends instead of taking the GIL.
class GilRelease {
 public:
  GilRelease();
  ~GilRelease();
  GilRelease(const GilRelease&) = delete;
  GilRelease& operator=(const GilRelease&) = delete;

 private:
  PyThreadState* state_;
};

// ---------------------------------------------------------------------------
// Devices

class Stream;

// One per axrt device for the life of the process, so that Python sees one
// object per device. Holds the device's default stream, made on first use.
class Device {
 public:
  explicit Device(Handle<axrt_device_t> handle);

  axrt_device_t handle() const { return handle_.get(); }
  const axrt_device_properties_t& properties() const { return properties_; }
  const std::string& id() const { return id_; }
  bool host_accessible() const { return properties_.type == AXRT_DEVICE_TYPE_CPU; }
  // (kDLCPU, 0) or (kDLCUDA, ordinal).
  std::pair<int, int> dlpack_device() const;

  std::shared_ptr<Stream> default_stream();
  // Gives the device a new default stream (after the old one failed);
  // work queued on the old one still runs.
  void reset_default_stream();

 private:
  Handle<axrt_device_t> handle_;
  axrt_device_properties_t properties_ = AXRT_DEVICE_PROPERTIES_INIT;
  std::string id_;
  std::mutex mutex_;
  std::shared_ptr<Stream> default_stream_;
};

// The process-wide instance, created on first use (so that importing axrt
// costs nothing and AXRT_DEVICE is read when a device is first asked for).
axrt_instance_t instance();
const std::vector<std::shared_ptr<Device>>& all_devices();
// The wrapper of `handle` (borrowed).
std::shared_ptr<Device> device_of(axrt_device_t handle);
// None: the default device; a str: that device; a Device: itself.
std::shared_ptr<Device> resolve_device(const py::object& device);
// The host device (cpu:0): where host memory lives. Looked up once.
std::shared_ptr<Device> host_device();

// ---------------------------------------------------------------------------
// Streams and events

class Stream {
 public:
  Stream(std::shared_ptr<Device> device, Handle<axrt_stream_t> handle)
      : device_(std::move(device)), handle_(std::move(handle)) {}
  axrt_stream_t handle() const { return handle_.get(); }
  const std::shared_ptr<Device>& device() const { return device_; }
  void synchronize();

 private:
  std::shared_ptr<Device> device_;
  Handle<axrt_stream_t> handle_;
};

// None: the device's default stream; a Stream of that device: itself.
std::shared_ptr<Stream> resolve_stream(const py::object& stream, const std::shared_ptr<Device>& device);

// Makes later work on `consumer` wait for everything queued so far on
// `producer` (an event record and wait; nothing when they are one stream).
void order_after(axrt_stream_t producer, axrt_stream_t consumer, axrt_device_t producer_device);

// ---------------------------------------------------------------------------
// Tensors

class Tensor {
 public:
  // `producer`: the stream whose queued work writes the tensor, or null when
  // its contents are ready.
  Tensor(Handle<axrt_tensor_t> handle, std::shared_ptr<Device> device,
         std::shared_ptr<Stream> producer);

  axrt_tensor_t handle() const { return handle_.get(); }
  const std::shared_ptr<Device>& device() const { return device_; }
  const axrt_tensor_info_t& info() const { return info_; }
  std::vector<int64_t> shape() const { return {info_.shape, info_.shape + info_.rank}; }
  bool read_only() const { return (info_.flags & AXRT_TENSOR_FLAG_READ_ONLY) != 0; }
  // Whether the host can read the memory (once its producer finished).
  bool host_visible() { return buffer_facts().host_visible; }
  // Host-pinned memory (of a CUDA device, or imported as such).
  bool pinned() { return buffer_facts().memory_type == AXRT_MEMORY_TYPE_HOST_PINNED; }

  const std::shared_ptr<Stream>& producer() const { return producer_; }
  void set_producer(std::shared_ptr<Stream> producer);
  // Waits (GIL released) for the work that writes the tensor.
  void synchronize();
  // The host address of element 0 (host-accessible devices only), after
  // synchronize().
  char* host_data();

 private:
  Handle<axrt_tensor_t> handle_;
  std::shared_ptr<Device> device_;
  std::mutex mutex_;
  std::shared_ptr<Stream> producer_;
  // The buffer's info, queried when first needed (results of calls that
  // are only passed on never need it). Used with the GIL held.
  const axrt_buffer_info_t& buffer_facts();

  axrt_tensor_info_t info_ = AXRT_TENSOR_INFO_INIT;
  bool have_buffer_facts_ = false;
  axrt_buffer_info_t buffer_info_ = AXRT_BUFFER_INFO_INIT;
};

// The numpy dtype of an axrt dtype (bfloat16 and fp8 through ml_dtypes);
// TypeError when there is none.
py::dtype numpy_dtype(axrt_dtype_t dtype);
// The axrt dtype of a numpy dtype; TypeError when there is none.
axrt_dtype_t axrt_dtype(const py::dtype& dtype);
// Accepts an axrt dtype name ("f32", "bf16"), a numpy dtype or anything
// numpy.dtype() takes.
axrt_dtype_t parse_dtype(const py::handle& dtype);

// An axrt tensor for `obj` on `device`, for work queued on `stream`:
// an axrt.Tensor as is (ordered after its producer), host arrays and DLPack
// producers of the device's memory without a copy, others copied to the
// device in stream order. `writable`: the tensor is written (out=, a
// mutable input), so it is never copied; `writable_what` names it in the
// error when it is elsewhere. Other objects (lists, Python scalars) become
// numpy arrays of `dtype` when it is given, of numpy's choice otherwise.
std::shared_ptr<Tensor> to_tensor(const py::handle& obj, const std::shared_ptr<Device>& device,
                                  const std::shared_ptr<Stream>& stream, bool writable,
                                  axrt_dtype_t dtype = AXRT_DTYPE_INVALID,
                                  const char* writable_what = "an out= tensor");

// Imports a DLPack capsule ("dltensor_versioned" or "dltensor"), renaming it
// once consumed.
std::shared_ptr<Tensor> import_capsule(const py::capsule& capsule);

// Zero-copy import of a numpy array that lives in host memory.
std::shared_ptr<Tensor> import_numpy(const py::array& array);

// axrt.from_dlpack(obj, device=, copy=).
std::shared_ptr<Tensor> from_dlpack(py::object obj, py::object device, py::object copy);

// A new contiguous tensor on `device` of the dtype and shape of `info`.
Handle<axrt_tensor_t> allocate_like(const axrt_tensor_info_t& info, const Device& device);

// A numpy array in host memory lent to axrt without a copy, as a tensor
// handle (what calls need; import_numpy wraps it).
Handle<axrt_tensor_t> lend_numpy(const py::array& array);

// A compact row-major copy, in new host memory, of a strided tensor of
// cpu:0, made once the work writing it completed.
std::shared_ptr<Tensor> compact_host_copy(const std::shared_ptr<Tensor>& t);

// Tensor.to(device, stream=).
std::shared_ptr<Tensor> tensor_to(const std::shared_ptr<Tensor>& self, const std::shared_ptr<Device>& device,
                                  const py::object& stream_arg);

// ---------------------------------------------------------------------------
// Module parts

// Registers the atexit hook of the interpreter's exit (see above).
void init_exit(py::module_& m);
void init_dtypes(py::module_& m);
void init_device(py::module_& m);
void init_stream(py::module_& m);
void init_tensor(py::module_& m);
void init_dlpack(py::module_& m);
void init_executable(py::module_& m);
void init_builder(py::module_& m);
void init_serving(py::module_& m);
// axrt_group_query_info as a dict: label, backend, size, rank (a group
// across processes), state, failed_rank, failure_code, failure, collectives
// (src/group.cc).
py::dict group_info(axrt_group_t group);
// `value` as a C string kept in `storage`, or NULL for None (src/group.cc).
const char* text_or_null(const py::object& value, std::string* storage);
// "sum", "max", "min"; ValueError otherwise (src/group.cc).
axrt_reduce_op_t parse_reduce_op(const std::string& op);
// A timeout argument in seconds (None: 0, the default; inf: no limit) as
// nanoseconds; ValueError naming `what` unless positive.
uint64_t timeout_ns(const py::object& seconds, const char* what);
void init_group(py::module_& m);
void init_group_member(py::module_& m);
void init_trace(py::module_& m);

// The handle of an _axrt.Executable (borrowed; TypeError for anything else).
axrt_executable_t executable_handle(const py::object& executable);

// The group of an axrt.Group (group.cc); TypeError for anything else,
// ValueError once it is closed.
axrt_group_t group_handle(const py::handle& group);
// The group of an axrt.GroupMember, or null when `object` is none
// (src/group_member.cc).
axrt_group_t group_member_handle(const py::handle& object);

}  // namespace axrt_py

#endif  // AXRT_PYTHON_BINDING_H_
