// axrt.GroupMember: this process's member of a group across processes
// (axrt_group_join). axrt.init_group() (axrt/distributed.py) makes one from
// a rendezvous. A collective takes this member's tensor: an axrt.Tensor on
// the member's device is worked on in stream order and returned at once; a
// numpy array is worked on in place (or into a new array) and returned once
// done.
#include <cmath>

#include "binding.h"

namespace axrt_py {
namespace {

class GroupMember {
 public:
  GroupMember(const std::string& id, uint32_t size, uint32_t rank, const py::object& device,
              const py::object& label, const py::object& timeout, const py::object& rendezvous_timeout,
              const py::object& heartbeat_interval, const py::object& heartbeat_timeout,
              const py::object& hostname)
      : device_(resolve_device(device.is_none() ? py::object(py::str("cpu:0")) : device)),
        rank_(rank),
        size_(size) {
    axrt_group_join_options_t options = AXRT_GROUP_JOIN_OPTIONS_INIT;
    std::string label_text, host_text;
    options.label = text_or_null(label, &label_text);
    options.hostname = text_or_null(hostname, &host_text);
    options.timeout_ns = timeout_ns(timeout, "timeout");
    options.rendezvous_timeout_ns = timeout_ns(rendezvous_timeout, "rendezvous_timeout");
    options.heartbeat_interval_ns = timeout_ns(heartbeat_interval, "heartbeat_interval");
    options.heartbeat_timeout_ns = timeout_ns(heartbeat_timeout, "heartbeat_timeout");
    axrt_status_t status = nullptr;
    {
      py::gil_scoped_release release;
      status = axrt_group_join(id.c_str(), size, rank, device_->handle(), &options, &group_);
    }
    check(status);
    // A stream of the member's own: a failed group fails the stream its
    // collectives ran on, and the next group's must not inherit that.
    Handle<axrt_stream_t> stream;
    check(axrt_stream_create(device_->handle(), nullptr, stream.out()));
    stream_ = std::make_shared<Stream>(device_, std::move(stream));
  }
  ~GroupMember() { close(); }

  void close() {
    axrt_group_t group = std::exchange(group_, nullptr);
    if (group != nullptr) {
      py::gil_scoped_release release;
      axrt_group_destroy(group);
    }
  }
  axrt_group_t handle() const {
    if (group_ == nullptr) throw py::value_error("the group member is closed");
    return group_;
  }

  py::dict info() const { return group_info(handle()); }

  void abort(const py::object& reason) {
    std::string text = reason.is_none() ? std::string() : reason.cast<std::string>();
    check(axrt_group_abort(handle(), static_cast<int32_t>(rank_), reason.is_none() ? nullptr : text.c_str()));
  }

  py::object all_reduce(const py::object& x, const std::string& op, const py::object& stream) {
    const axrt_reduce_op_t reduce = parse_reduce_op(op);
    return in_place(x, stream, "all_reduce", [&](axrt_collective_member_t& m, const axrt_tensor_info_t& info) {
      return axrt_group_all_reduce(handle(), &m, info.element_count, info.dtype, reduce);
    });
  }

  py::object broadcast(const py::object& x, uint32_t root, const py::object& stream) {
    return in_place(x, stream, "broadcast", [&](axrt_collective_member_t& m, const axrt_tensor_info_t& info) {
      return axrt_group_broadcast(handle(), &m, info.element_count, info.dtype, root);
    });
  }

  py::object all_gather(const py::object& x, const py::object& stream) {
    return into_new(x, stream, "all_gather", [&](std::vector<int64_t>& shape) {
      shape[0] *= size_;
    }, [&](axrt_collective_member_t& m, const axrt_tensor_info_t& info) {
      return axrt_group_all_gather(handle(), &m, info.element_count, info.dtype);
    });
  }

  py::object reduce_scatter(const py::object& x, const std::string& op, const py::object& stream) {
    const axrt_reduce_op_t reduce = parse_reduce_op(op);
    return into_new(x, stream, "reduce_scatter", [&](std::vector<int64_t>& shape) {
      if (shape[0] % size_ != 0) {
        throw py::value_error("reduce_scatter: the tensor's first dimension (" + std::to_string(shape[0]) +
                              ") must be a multiple of the group's " + std::to_string(size_) + " members");
      }
      shape[0] /= size_;
    }, [&](axrt_collective_member_t& m, const axrt_tensor_info_t& info) {
      return axrt_group_reduce_scatter(handle(), &m, info.element_count / size_, info.dtype, reduce);
    });
  }

  void barrier() {
    py::array_t<int32_t> one(1);
    one.mutable_at(0) = 1;
    all_reduce(one, "sum", py::none());
  }

  uint32_t rank() const { return rank_; }
  uint32_t size() const { return size_; }
  const std::shared_ptr<Device>& device() const { return device_; }

 private:
  std::shared_ptr<Stream> stream_of(const py::object& stream) const {
    return stream.is_none() ? stream_ : resolve_stream(stream, device_);
  }

  // This member's tensor: contiguous, writable, on the member's device.
  std::shared_ptr<Tensor> operand(const py::object& x, const std::shared_ptr<Stream>& stream,
                                  const char* what) const {
    if (!py::isinstance<Tensor>(x) && !py::isinstance<py::array>(x)) {
      throw py::type_error(std::string(what) + ": takes an axrt.Tensor or a numpy array, not " +
                           py::str(py::type::handle_of(x).attr("__name__")).cast<std::string>());
    }
    auto t = to_tensor(x, device_, stream, /*writable=*/true, AXRT_DTYPE_INVALID,
                       "the tensor of a collective");
    if (!t->info().contiguous) throw py::value_error(std::string(what) + ": the tensor is not contiguous");
    if (t->read_only()) throw py::value_error(std::string(what) + ": the tensor is read-only");
    return t;
  }

  static axrt_collective_member_t member_of(const std::shared_ptr<Stream>& stream, const Tensor& send,
                                            const Tensor& recv, Handle<axrt_buffer_t>* send_buffer,
                                            Handle<axrt_buffer_t>* recv_buffer) {
    check(axrt_tensor_get_buffer(send.handle(), send_buffer->out()));
    check(axrt_tensor_get_buffer(recv.handle(), recv_buffer->out()));
    return {stream->handle(), send_buffer->get(), send.info().byte_offset, recv_buffer->get(),
            recv.info().byte_offset};
  }

  template <typename Call>
  py::object in_place(const py::object& x, const py::object& stream_arg, const char* what, Call call) {
    auto stream = stream_of(stream_arg);
    auto t = operand(x, stream, what);
    Handle<axrt_buffer_t> a, b;
    axrt_collective_member_t m = member_of(stream, *t, *t, &a, &b);
    check(call(m, t->info()));
    t->set_producer(stream);
    if (py::isinstance<py::array>(x)) {
      t->synchronize();
      return x;
    }
    return py::cast(t);
  }

  template <typename Shape, typename Call>
  py::object into_new(const py::object& x, const py::object& stream_arg, const char* what, Shape reshape,
                      Call call) {
    auto stream = stream_of(stream_arg);
    auto in = operand(x, stream, what);
    const axrt_tensor_info_t& info = in->info();
    if (info.rank == 0) throw py::value_error(std::string(what) + ": the tensor needs at least one dimension");
    std::vector<int64_t> shape(info.shape, info.shape + info.rank);
    reshape(shape);
    std::shared_ptr<Tensor> out;
    py::object result;
    if (py::isinstance<py::array>(x)) {
      std::vector<py::ssize_t> dims(shape.begin(), shape.end());
      py::array array(py::reinterpret_borrow<py::array>(x).dtype(), dims);
      out = to_tensor(array, device_, stream, true);
      result = array;
    } else {
      axrt_tensor_info_t like = info;
      like.shape = shape.data();
      like.rank = static_cast<uint32_t>(shape.size());
      out = std::make_shared<Tensor>(allocate_like(like, *device_), device_, stream);
      result = py::cast(out);
    }
    Handle<axrt_buffer_t> a, b;
    axrt_collective_member_t m = member_of(stream, *in, *out, &a, &b);
    check(call(m, info));
    out->set_producer(stream);
    in->set_producer(stream);  // read until the collective ran
    if (py::isinstance<py::array>(x)) out->synchronize();
    return result;
  }

  std::shared_ptr<Device> device_;
  std::shared_ptr<Stream> stream_;
  uint32_t rank_ = 0;
  uint32_t size_ = 0;
  axrt_group_t group_ = nullptr;
};

}  // namespace

axrt_group_t group_member_handle(const py::handle& object) {
  if (!py::isinstance<GroupMember>(object)) return nullptr;
  return object.cast<const GroupMember&>().handle();
}

void init_group_member(py::module_& m) {
  py::class_<GroupMember, std::shared_ptr<GroupMember>>(m, "GroupMember", R"doc(
This process's member of a device group across processes and hosts.

Made by ``axrt.init_group()``. Every member runs the same collectives in the
same order; each call takes this member's tensor: an ``axrt.Tensor`` on the
member's device (queued on the member's own stream, or ``stream=``, after the
work that writes it, and returned at once) or a numpy array (worked on, and
returned once done). A member that exits, is killed or
stops answering fails the group on every other member: their collectives
raise an ``axrt.Error`` naming it, and ``info()`` says which. A failed group
stays failed: close it and join a new one (a new name in the rendezvous).)doc")
      .def_property_readonly("rank", &GroupMember::rank, "This member's rank.")
      .def_property_readonly("size", &GroupMember::size, "The number of members (the world size).")
      .def_property_readonly("device", &GroupMember::device, "This member's device.")
      .def("info", &GroupMember::info,
           "A dict: label, backend, size, rank, state ('active' or 'aborted'), failed_rank, "
           "failure_code, failure (the message), collectives (queued so far).")
      .def("all_reduce", &GroupMember::all_reduce, py::arg("tensor"), py::arg("op") = "sum",
           py::kw_only(), py::arg("stream") = py::none(),
           "Reduces every member's tensor element-wise (op: 'sum', 'max', 'min') into this one, in "
           "place; returns it.")
      .def("broadcast", &GroupMember::broadcast, py::arg("tensor"), py::arg("root") = 0, py::kw_only(),
           py::arg("stream") = py::none(), "Copies member `root`'s tensor into this one, in place; returns it.")
      .def("all_gather", &GroupMember::all_gather, py::arg("tensor"), py::kw_only(),
           py::arg("stream") = py::none(),
           "A new tensor: every member's tensor concatenated along axis 0, rank 0 first.")
      .def("reduce_scatter", &GroupMember::reduce_scatter, py::arg("tensor"), py::arg("op") = "sum",
           py::kw_only(), py::arg("stream") = py::none(),
           "A new tensor: block `rank` (along axis 0) of every member's tensor reduced.")
      .def("barrier", &GroupMember::barrier, "Returns once every member called barrier().")
      .def("abort", &GroupMember::abort, py::arg("reason") = py::none(),
           "Fails the group as if this member had failed with `reason`.")
      .def("close", &GroupMember::close, "Leaves the group (the others see this member gone).")
      .def("__enter__", [](std::shared_ptr<GroupMember> g) { return g; })
      .def("__exit__", [](GroupMember& g, py::args) { g.close(); })
      .def("__repr__", [](const GroupMember& g) {
        return "<axrt.GroupMember rank " + std::to_string(g.rank()) + " of " + std::to_string(g.size()) +
               " on " + g.device()->id() + ">";
      });

  m.def(
      "_join_group",
      [](const std::string& id, uint32_t size, uint32_t rank, py::object device, py::object label,
         py::object timeout, py::object rendezvous_timeout, py::object heartbeat_interval,
         py::object heartbeat_timeout, py::object hostname) {
        return std::make_shared<GroupMember>(id, size, rank, device, label, timeout, rendezvous_timeout,
                                             heartbeat_interval, heartbeat_timeout, hostname);
      },
      py::arg("id"), py::arg("size"), py::arg("rank"), py::arg("device") = py::none(), py::kw_only(),
      py::arg("label") = py::none(), py::arg("timeout") = py::none(),
      py::arg("rendezvous_timeout") = py::none(), py::arg("heartbeat_interval") = py::none(),
      py::arg("heartbeat_timeout") = py::none(), py::arg("hostname") = py::none(),
      "axrt_group_join(): use axrt.init_group().");

  m.def(
      "_engine_follow",
      [](py::object executable, py::object member) {
        axrt_executable_t exe = executable_handle(executable);
        axrt_group_t group = group_handle(member);
        axrt_status_t status;
        {
          py::gil_scoped_release release;
          status = axrt_engine_follow(exe, group, nullptr);
        }
        check(status);
      },
      py::arg("executable"), py::arg("member"),
      "axrt_engine_follow(): use axrt.llm.follow().");
}

}  // namespace axrt_py
