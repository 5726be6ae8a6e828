// axrt.Stream and axrt.Event.
#include <cmath>

#include "binding.h"

namespace axrt_py {
namespace {

class Event {
 public:
  Event(std::shared_ptr<Device> device, bool timing) : device_(std::move(device)) {
    axrt_event_options_t options = AXRT_EVENT_OPTIONS_INIT;
    if (!timing) options.flags = AXRT_EVENT_FLAG_DISABLE_TIMING;
    check(axrt_event_create(device_->handle(), &options, handle_.out()));
  }
  axrt_event_t handle() const { return handle_.get(); }
  const std::shared_ptr<Device>& device() const { return device_; }

 private:
  std::shared_ptr<Device> device_;
  Handle<axrt_event_t> handle_;
};

uint64_t timeout_ns(const py::object& timeout) {
  if (timeout.is_none()) return AXRT_TIMEOUT_INFINITE;
  const double seconds = timeout.cast<double>();
  if (!(seconds >= 0)) throw py::value_error("timeout must be None or a number of seconds >= 0");
  const double ns = seconds * 1e9;
  return ns >= 1.8e19 ? AXRT_TIMEOUT_INFINITE : static_cast<uint64_t>(ns);
}

}  // namespace

void Stream::synchronize() {
  axrt_status_t status;
  {
    GilRelease release;
    status = axrt_stream_synchronize(handle_.get());
  }
  check(status);
}

std::shared_ptr<Stream> resolve_stream(const py::object& stream, const std::shared_ptr<Device>& device) {
  if (stream.is_none()) return device->default_stream();
  if (!py::isinstance<Stream>(stream)) {
    throw py::type_error("stream must be None or an axrt.Stream; got " + py::repr(stream).cast<std::string>());
  }
  auto s = stream.cast<std::shared_ptr<Stream>>();
  if (s->device() != device) {
    throw py::value_error("the stream is on " + s->device()->id() + ", the work on " + device->id());
  }
  return s;
}

void order_after(axrt_stream_t producer, axrt_stream_t consumer, axrt_device_t producer_device) {
  if (!producer || producer == consumer) return;
  Handle<axrt_event_t> event;
  axrt_event_options_t options = AXRT_EVENT_OPTIONS_INIT;
  options.flags = AXRT_EVENT_FLAG_DISABLE_TIMING;
  check(axrt_event_create(producer_device, &options, event.out()));
  check(axrt_stream_record_event(producer, event.get()));
  check(axrt_stream_wait_event(consumer, event.get()));
}

void init_stream(py::module_& m) {
  py::class_<Stream, std::shared_ptr<Stream>>(m, "Stream", R"doc(
An in-order queue of work on one device. Calls, copies and event records
queued on a stream run in the order they were queued; different streams run
independently unless ordered with events. A failed operation fails its
stream for good: synchronize() raises its error, and later work on it fails
the same way.)doc")
      .def(py::init([](py::object device) {
             auto d = resolve_device(device);
             Handle<axrt_stream_t> handle;
             check(axrt_stream_create(d->handle(), nullptr, handle.out()));
             return std::make_shared<Stream>(d, std::move(handle));
           }),
           py::kw_only(), py::arg("device") = py::none(),
           "Creates a stream on `device` (None: the default device).")
      .def_property_readonly("device", &Stream::device, "The stream's device.")
      .def("synchronize", &Stream::synchronize,
           "Blocks until everything queued has completed; raises the stream's failure, if any.")
      .def(
          "query",
          [](Stream& s) {
            bool idle = false;
            check(axrt_stream_query(s.handle(), &idle));
            return idle;
          },
          "True when everything queued has completed, without blocking; raises the stream's "
          "failure, if any.")
      .def(
          "record_event",
          [](Stream& s, std::shared_ptr<Event> event) {
            if (!event) event = std::make_shared<Event>(s.device(), true);
            check(axrt_stream_record_event(s.handle(), event->handle()));
            return event;
          },
          py::arg("event") = nullptr,
          "Records `event` (a new one when None) at this point of the stream and returns it.")
      .def(
          "wait_event",
          [](Stream& s, const Event& event) { check(axrt_stream_wait_event(s.handle(), event.handle())); },
          py::arg("event"),
          "Makes work queued later on this stream wait for the latest record of `event`, from any "
          "stream or device, without blocking the caller.")
      .def(
          "wait_stream",
          [](Stream& s, const Stream& other) {
            order_after(other.handle(), s.handle(), other.device()->handle());
          },
          py::arg("other"), "Makes work queued later on this stream wait for everything queued so far on `other`.")
      .def_property_readonly(
          "native_handle",
          [](Stream& s) -> py::object {
            void* native = nullptr;
            axrt_status_t status = axrt_stream_get_native_handle(s.handle(), &native);
            if (status) {
              axrt_status_code_t code = axrt_status_code(status);
              if (code == AXRT_STATUS_CODE_UNIMPLEMENTED) {
                axrt_status_free(status);
                return py::none();
              }
              check(status);
            }
            return py::int_(reinterpret_cast<uintptr_t>(native));
          },
          "The driver's own queue as an integer (a CUstream for CUDA devices), or None where the "
          "driver has none (the CPU).")
      .def("__repr__", [](const Stream& s) { return "<axrt.Stream on " + s.device()->id() + ">"; });

  py::class_<Event, std::shared_ptr<Event>>(m, "Event", R"doc(
A marker recorded into a stream: waited on by the host or by other streams,
and timed.)doc")
      .def(py::init([](py::object device, bool timing) {
             return std::make_shared<Event>(resolve_device(device), timing);
           }),
           py::kw_only(), py::arg("device") = py::none(), py::arg("timing") = true,
           "Creates an event on `device` (None: the default device); timing=False skips timestamps.")
      .def_property_readonly("device", &Event::device, "The event's device.")
      .def(
          "record",
          [](Event& e, py::object stream) {
            auto s = resolve_stream(stream, e.device());
            check(axrt_stream_record_event(s->handle(), e.handle()));
          },
          py::kw_only(), py::arg("stream") = py::none(),
          "Records the event on `stream` (None: the device's default stream).")
      .def(
          "query",
          [](Event& e) {
            bool complete = false;
            check(axrt_event_query(e.handle(), &complete));
            return complete;
          },
          "True when the latest record has completed, without blocking; raises the failure it "
          "completed with.")
      .def(
          "synchronize",
          [](Event& e, py::object timeout) {
            const uint64_t ns = timeout_ns(timeout);
            axrt_status_t status;
            {
              GilRelease release;
              status = axrt_event_wait(e.handle(), ns);
            }
            check(status);
          },
          py::arg("timeout") = py::none(),
          "Blocks until the latest record completes, or raises axrt.DeadlineExceededError after "
          "`timeout` seconds (None: no limit).")
      .def(
          "elapsed_time",
          [](Event& start, const Event& end) {
            int64_t ns = 0;
            check(axrt_event_elapsed_time(start.handle(), end.handle(), &ns));
            return static_cast<double>(ns) / 1e6;
          },
          py::arg("end"), "Milliseconds from this event's completion to `end`'s.")
      .def("__repr__", [](const Event& e) { return "<axrt.Event on " + e.device()->id() + ">"; });
}

}  // namespace axrt_py
