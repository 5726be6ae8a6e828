// axrt.devices(), axrt.device(), axrt.drivers() and axrt.Device.
#include <dlpack/dlpack.h>

#include <cstdlib>

#include "binding.h"

namespace axrt_py {
namespace {

struct Runtime {
  Handle<axrt_instance_t> instance;
  std::vector<std::shared_ptr<Device>> devices;
};

// Made once, on first use, and never destroyed: runtime threads may still
// finish work (and call DLPack deleters) while the interpreter shuts down.
Runtime& runtime() {
  static Runtime* r = [] {
    auto* r = new Runtime();
    // The GIL stays held: another thread waiting here for this static to be
    // made would hold it and deadlock with us.
    axrt_status_t status = axrt_instance_create(nullptr, r->instance.out());
    if (status) {
      delete r;
      check(status);
    }
    size_t count = 0;
    check(axrt_instance_device_count(r->instance.get(), &count));
    for (size_t i = 0; i < count; ++i) {
      Handle<axrt_device_t> device;
      check(axrt_instance_get_device(r->instance.get(), i, device.out()));
      r->devices.push_back(std::make_shared<Device>(std::move(device)));
    }
    return r;
  }();
  return *r;
}

py::dict pool_statistics(const Device& device) {
  axrt_pool_statistics_t s = AXRT_POOL_STATISTICS_INIT;
  check(axrt_device_query_pool_statistics(device.handle(), &s));
  py::dict d;
  d["bytes_in_use"] = s.bytes_in_use;
  d["bytes_reserved"] = s.bytes_reserved;
  d["peak_bytes_in_use"] = s.peak_bytes_in_use;
  d["allocation_count"] = s.allocation_count;
  d["reuse_count"] = s.reuse_count;
  d["deallocation_count"] = s.deallocation_count;
  d["trim_count"] = s.trim_count;
  return d;
}

// How `device` reaches the memory of `peer` (axrt_device_query_peer).
py::dict peer_info(const Device& device, const Device& peer) {
  axrt_device_peer_info_t info = AXRT_DEVICE_PEER_INFO_INIT;
  check(axrt_device_query_peer(device.handle(), peer.handle(), &info));
  py::dict d;
  d["link"] = axrt_device_link_name(info.link);
  d["link_count"] = info.link_count;
  d["direct_access"] = info.direct_access;
  d["native_atomics"] = info.native_atomics;
  d["performance_rank"] = info.performance_rank;
  return d;
}

const char* type_name(axrt_device_type_t type) {
  switch (type) {
    case AXRT_DEVICE_TYPE_CPU: return "cpu";
    case AXRT_DEVICE_TYPE_CUDA: return "cuda";
    default: return "unknown";
  }
}

}  // namespace

Device::Device(Handle<axrt_device_t> handle) : handle_(std::move(handle)) {
  check(axrt_device_query_properties(handle_.get(), &properties_));
  id_ = properties_.id;
}

std::pair<int, int> Device::dlpack_device() const {
  if (properties_.type == AXRT_DEVICE_TYPE_CUDA) {
    return {kDLCUDA, static_cast<int>(properties_.ordinal)};
  }
  return {kDLCPU, 0};
}

std::shared_ptr<Stream> Device::default_stream() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!default_stream_) {
    Handle<axrt_stream_t> stream;
    axrt_stream_options_t options = AXRT_STREAM_OPTIONS_INIT;
    axrt_debug_label_t label = AXRT_DEBUG_LABEL_INIT("python default stream");
    options.next = &label;
    check(axrt_stream_create(handle_.get(), &options, stream.out()));
    default_stream_ = std::make_shared<Stream>(device_of(handle_.get()), std::move(stream));
  }
  return default_stream_;
}

void Device::reset_default_stream() {
  std::lock_guard<std::mutex> lock(mutex_);
  default_stream_.reset();
}

axrt_instance_t instance() { return runtime().instance.get(); }

const std::vector<std::shared_ptr<Device>>& all_devices() { return runtime().devices; }

std::shared_ptr<Device> device_of(axrt_device_t handle) {
  for (const auto& d : all_devices()) {
    if (d->handle() == handle) return d;
  }
  // Devices are enumerated once per instance; a handle of this instance is
  // always among them.
  throw std::logic_error("device handle not of this instance");
}

std::shared_ptr<Device> resolve_device(const py::object& device) {
  if (device.is_none()) {
    // AXRT_DEVICE is read once, when the default device is first asked for.
    static std::shared_ptr<Device>* default_device = nullptr;
    if (!default_device) default_device = new std::shared_ptr<Device>(resolve_device(py::str("")));
    return *default_device;
  }
  if (py::isinstance<py::str>(device)) {
    const std::string name = device.cast<std::string>();
    Handle<axrt_device_t> found;
    check(axrt_instance_find_device(instance(), name.c_str(), found.out()));
    return device_of(found.get());
  }
  if (py::isinstance<Device>(device)) return device.cast<std::shared_ptr<Device>>();
  throw py::type_error("device must be None, a name such as 'cpu:0', or an axrt.Device; got " +
                       py::repr(device).cast<std::string>());
}

std::shared_ptr<Device> host_device() {
  static std::shared_ptr<Device>* host = new std::shared_ptr<Device>(resolve_device(py::str("cpu:0")));
  return *host;
}

void init_device(py::module_& m) {
  py::class_<Device, std::shared_ptr<Device>>(m, "Device", R"doc(
A device of the runtime, such as cpu:0 or cuda:0. There is one object per
device: get them from axrt.devices() or axrt.device(name).)doc")
      .def_property_readonly("id", &Device::id, "The device's name: 'cpu:0', 'cuda:1'.")
      .def_property_readonly("name", [](const Device& d) { return std::string(d.properties().name); },
                             "The CPU model or GPU product name.")
      .def_property_readonly("driver", [](const Device& d) { return std::string(d.properties().driver); },
                             "The driver serving the device: 'cpu', 'cuda'.")
      .def_property_readonly("type", [](const Device& d) { return type_name(d.properties().type); },
                             "'cpu' or 'cuda'.")
      .def_property_readonly("ordinal", [](const Device& d) { return d.properties().ordinal; },
                             "The device's index within its driver.")
      .def_property_readonly("compute_units", [](const Device& d) { return d.properties().compute_units; },
                             "CPU threads used for dispatch, or CUDA streaming multiprocessors.")
      .def_property_readonly("total_memory", [](const Device& d) { return d.properties().total_memory; },
                             "Bytes of memory.")
      .def_property_readonly(
          "compute_capability",
          [](const Device& d) -> py::object {
            if (d.properties().type != AXRT_DEVICE_TYPE_CUDA) return py::none();
            return py::make_tuple(d.properties().compute_capability_major,
                                  d.properties().compute_capability_minor);
          },
          "(major, minor) for CUDA devices, None elsewhere.")
      .def_property_readonly("numa_node", [](const Device& d) { return d.properties().numa_node; },
                             "The NUMA node the device is attached to, or -1 when the system "
                             "does not say.")
      .def_property_readonly("default_stream", &Device::default_stream,
                             "The stream calls use when given no stream=.")
      .def("reset_default_stream", &Device::reset_default_stream,
           "Gives the device a new default stream, for when the old one failed (a failed stream "
           "stays failed). Work queued on the old one still runs; tensors it writes still wait for it.")
      .def(
          "synchronize",
          [](Device& d) {
            axrt_status_t status;
            {
              GilRelease release;
              status = axrt_device_synchronize(d.handle());
            }
            check(status);
          },
          "Waits until the work of every stream of the device has completed.")
      .def("peer", &peer_info, py::arg("other"),
           R"doc(How this device reaches the memory of `other` (an axrt.Device, or this
device itself): a dict with link ('self', 'host-memory', 'pcie', 'nvlink' or
'none'), link_count (NVLinks), direct_access, native_atomics and
performance_rank.)doc")
      .def("pool_statistics", &pool_statistics,
           "The device pool's counters: bytes_in_use, bytes_reserved, peak_bytes_in_use, "
           "allocation_count, reuse_count, deallocation_count, trim_count.")
      .def(
          "trim_pool",
          [](Device& d, uint64_t keep_bytes) {
            axrt_status_t status;
            {
              GilRelease release;
              status = axrt_device_trim_pool(d.handle(), keep_bytes);
            }
            check(status);
          },
          py::arg("keep_bytes") = 0,
          "Hands cached, unused pool memory back to the system until at most keep_bytes stay cached.")
      .def("__dlpack_device__", &Device::dlpack_device,
           "The DLPack (device_type, device_id) of the device's memory.")
      .def("__repr__",
           [](const Device& d) { return "<axrt.Device " + d.id() + " '" + d.properties().name + "'>"; })
      .def("__str__", &Device::id);

  m.def(
      "devices", [] { return all_devices(); },
      "Every device of every driver, ordered by driver then ordinal; cpu:0 is always there.");
  m.def(
      "device", [](py::object name) { return resolve_device(name); }, py::arg("name") = py::none(),
      R"doc(The device named `name` ('cpu:0', 'cuda:0'). None selects the default device:
the one named by the environment variable AXRT_DEVICE, else cpu:0. Raises
axrt.NotFoundError naming the devices there are.)doc");
  m.def(
      "drivers",
      [] {
        size_t count = 0;
        check(axrt_instance_driver_count(instance(), &count));
        py::list out;
        for (size_t i = 0; i < count; ++i) {
          axrt_driver_info_t info = AXRT_DRIVER_INFO_INIT;
          check(axrt_instance_query_driver_info(instance(), i, &info));
          py::dict d;
          d["name"] = std::string(info.name);
          d["device_count"] = info.device_count;
          d["availability"] = std::string(info.availability);
          out.append(d);
        }
        return out;
      },
      "The drivers built in, each a dict of name, device_count and availability (why a driver "
      "has no devices, such as no CUDA driver installed; '' when it has some).");
}

}  // namespace axrt_py
