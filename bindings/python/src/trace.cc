// Tracing (axrt/trace.h) and the counters behind axrt.stats(): the
// primitives that axrt.profile (axrt/_profile.py) wraps.
#include "binding.h"

namespace axrt_py {
namespace {

py::dict stream_statistics(axrt_device_t device) {
  axrt_stream_statistics_t s = AXRT_STREAM_STATISTICS_INIT;
  check(axrt_device_query_stream_statistics(device, &s));
  py::dict d;
  d["streams_created"] = s.streams_created;
  d["copies"] = s.copies;
  d["copy_bytes"] = s.copy_bytes;
  d["fills"] = s.fills;
  d["fill_bytes"] = s.fill_bytes;
  d["host_functions"] = s.host_functions;
  d["event_records"] = s.event_records;
  d["event_waits"] = s.event_waits;
  d["deallocations"] = s.deallocations;
  d["function_calls"] = s.function_calls;
  d["dispatches"] = s.dispatches;
  d["stream_failures"] = s.stream_failures;
  return d;
}

}  // namespace

void init_trace(py::module_& m) {
  m.def(
      "_trace_start",
      [](const std::string& path, uint64_t max_events) {
        axrt_trace_options_t options = AXRT_TRACE_OPTIONS_INIT;
        options.path = path.c_str();
        options.max_events = max_events;
        check(axrt_instance_trace_start(instance(), &options));
      },
      py::arg("path"), py::arg("max_events") = 0);
  m.def("_trace_stop", [] {
    axrt_trace_result_t result = AXRT_TRACE_RESULT_INIT;
    axrt_status_t status;
    {
      // Writing the file takes a while; streams and other threads go on.
      GilRelease release;
      status = axrt_instance_trace_stop(instance(), &result);
    }
    check(status);
    py::dict d;
    d["events"] = result.events;
    d["dropped_events"] = result.dropped_events;
    d["bytes_written"] = result.bytes_written;
    return d;
  });
  m.def("_trace_is_active", [] { return axrt_trace_is_active(); });
  m.def("_trace_range_begin",
        [](const std::string& name) { check(axrt_trace_range_begin(name.c_str())); });
  m.def("_trace_range_end", [] { axrt_trace_range_end(); });
  m.def(
      "_stream_statistics", [](const Device& device) { return stream_statistics(device.handle()); },
      py::arg("device"));
}

}  // namespace axrt_py
