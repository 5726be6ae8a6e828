// axrt.Group: device groups and their collectives (axrt/group.h). A
// collective takes one tensor per member and queues its work on each
// member's stream (the device's default stream unless streams= says
// otherwise), after the work that writes the tensors; it returns at once.
#include <cmath>
#include <optional>

#include "binding.h"

namespace axrt_py {
namespace {


std::string shape_text(const axrt_tensor_info_t& info) {
  std::string s = "[";
  for (uint32_t i = 0; i < info.rank; ++i) s += (i ? ", " : "") + std::to_string(info.shape[i]);
  return s + "]";
}

// One member's tensor, on the member's device, with its buffer.
struct Operand {
  std::shared_ptr<Tensor> tensor;
  Handle<axrt_buffer_t> buffer;
  uint64_t offset = 0;
};

Operand operand_of(std::shared_ptr<Tensor> t) {
  Operand o;
  check(axrt_tensor_get_buffer(t->handle(), o.buffer.out()));
  o.offset = t->info().byte_offset;
  o.tensor = std::move(t);
  return o;
}

class Group {
 public:
  Group(const py::object& devices, const py::object& label, const py::object& timeout,
        const py::object& backend) {
    std::vector<axrt_device_t> handles;
    for (py::handle d : devices) {
      devices_.push_back(resolve_device(py::reinterpret_borrow<py::object>(d)));
      handles.push_back(devices_.back()->handle());
    }
    if (devices_.empty()) throw py::value_error("a group needs at least one device");
    axrt_group_options_t options = AXRT_GROUP_OPTIONS_INIT;
    std::string label_text, backend_text;
    options.label = text_or_null(label, &label_text);
    options.backend = text_or_null(backend, &backend_text);
    options.timeout_ns = timeout_ns(timeout, "timeout");
    check(axrt_group_create(handles.data(), handles.size(), &options, &group_));
  }
  ~Group() { close(); }

  void close() {
    axrt_group_destroy(group_);
    group_ = nullptr;
  }
  axrt_group_t handle() const {
    if (group_ == nullptr) throw py::value_error("the group is closed");
    return group_;
  }
  size_t size() const { return devices_.size(); }
  const std::vector<std::shared_ptr<Device>>& devices() const { return devices_; }

  py::dict info() const { return group_info(handle()); }

  void abort(const py::object& rank, const py::object& reason) {
    const int32_t r = rank.is_none() ? -1 : rank.cast<int32_t>();
    std::string text = reason.is_none() ? std::string() : reason.cast<std::string>();
    check(axrt_group_abort(handle(), r, reason.is_none() ? nullptr : text.c_str()));
  }

  // The member streams of a call: `streams`, or the devices' default streams.
  std::vector<std::shared_ptr<Stream>> streams_of(const py::object& streams) const {
    std::vector<std::shared_ptr<Stream>> out;
    if (!streams.is_none()) {
      const py::sequence seq = streams.cast<py::sequence>();
      if (seq.size() != size()) {
        throw py::value_error("streams: " + std::to_string(seq.size()) + " given, the group has " +
                              std::to_string(size()) + " members");
      }
      for (size_t r = 0; r < size(); ++r) out.push_back(resolve_stream(seq[r], devices_[r]));
    } else {
      for (const auto& d : devices_) out.push_back(d->default_stream());
    }
    return out;
  }

  // The members' tensors, each on its member's device (moved there when
  // not), alike in element type and shape, contiguous and writable.
  std::vector<Operand> operands(const py::object& tensors, const std::vector<std::shared_ptr<Stream>>& streams,
                                const char* what) const {
    const py::sequence seq = tensors.cast<py::sequence>();
    if (seq.size() != size()) {
      throw py::value_error(std::string(what) + ": " + std::to_string(seq.size()) +
                            " tensors given, one per member is " + std::to_string(size()));
    }
    std::vector<Operand> out;
    for (size_t r = 0; r < size(); ++r) {
      auto t = to_tensor(seq[r], devices_[r], streams[r], /*writable=*/false);
      const axrt_tensor_info_t& info = t->info();
      if (!info.contiguous) {
        throw py::value_error(std::string(what) + ": tensor " + std::to_string(r) + " is not contiguous");
      }
      if (t->read_only()) {
        throw py::value_error(std::string(what) + ": tensor " + std::to_string(r) + " is read-only");
      }
      if (r > 0) {
        const axrt_tensor_info_t& first = out[0].tensor->info();
        if (info.dtype != first.dtype || shape_text(info) != shape_text(first)) {
          throw py::value_error(std::string(what) + ": tensor " + std::to_string(r) + " is " +
                                axrt_dtype_name(info.dtype) + shape_text(info) + ", tensor 0 " +
                                axrt_dtype_name(first.dtype) + shape_text(first) +
                                "; every member's tensor is alike");
        }
      }
      out.push_back(operand_of(std::move(t)));
    }
    return out;
  }

  // New tensors of `shape` and `dtype`, one on each member.
  std::vector<Operand> allocate(const axrt_tensor_info_t& like, const std::vector<int64_t>& shape,
                                const std::vector<std::shared_ptr<Stream>>& streams) const {
    axrt_tensor_info_t info = like;
    info.shape = shape.data();
    info.rank = static_cast<uint32_t>(shape.size());
    std::vector<Operand> out;
    for (size_t r = 0; r < size(); ++r) {
      out.push_back(operand_of(std::make_shared<Tensor>(allocate_like(info, *devices_[r]), devices_[r], streams[r])));
    }
    return out;
  }

  // Each member's stream, send (`sends`) and receive (`recvs`) ranges.
  static std::vector<axrt_collective_member_t> members_of(
      const std::vector<std::shared_ptr<Stream>>& streams, const std::vector<Operand>& sends,
      const std::vector<Operand>& recvs) {
    std::vector<axrt_collective_member_t> members;
    for (size_t r = 0; r < streams.size(); ++r) {
      members.push_back({streams[r]->handle(), sends[r].buffer.get(), sends[r].offset,
                         recvs[r].buffer.get(), recvs[r].offset});
    }
    return members;
  }

  static py::list results(const std::vector<Operand>& operands,
                          const std::vector<std::shared_ptr<Stream>>& streams) {
    py::list out;
    for (size_t r = 0; r < operands.size(); ++r) {
      operands[r].tensor->set_producer(streams[r]);
      out.append(py::cast(operands[r].tensor));
    }
    return out;
  }

  py::list all_reduce(const py::object& tensors, const std::string& op, const py::object& streams_arg) {
    const axrt_reduce_op_t reduce = parse_reduce_op(op);
    auto streams = streams_of(streams_arg);
    auto ops = operands(tensors, streams, "all_reduce");
    const auto members = members_of(streams, ops, ops);
    const axrt_tensor_info_t& info = ops[0].tensor->info();
    check(axrt_group_all_reduce(handle(), members.data(), info.element_count, info.dtype, reduce));
    return results(ops, streams);
  }

  py::list broadcast(const py::object& tensors, size_t root, const py::object& streams_arg) {
    auto streams = streams_of(streams_arg);
    auto ops = operands(tensors, streams, "broadcast");
    const auto members = members_of(streams, ops, ops);
    const axrt_tensor_info_t& info = ops[0].tensor->info();
    check(axrt_group_broadcast(handle(), members.data(), info.element_count, info.dtype, root));
    return results(ops, streams);
  }

  py::list all_gather(const py::object& tensors, const py::object& streams_arg) {
    auto streams = streams_of(streams_arg);
    auto ins = operands(tensors, streams, "all_gather");
    const axrt_tensor_info_t& info = ins[0].tensor->info();
    if (info.rank == 0) throw py::value_error("all_gather: the tensors need at least one dimension");
    std::vector<int64_t> shape(info.shape, info.shape + info.rank);
    shape[0] *= static_cast<int64_t>(size());
    auto outs = allocate(info, shape, streams);
    const auto members = members_of(streams, ins, outs);
    check(axrt_group_all_gather(handle(), members.data(), info.element_count, info.dtype));
    keep_until_done(ins, streams);
    return results(outs, streams);
  }

  py::list reduce_scatter(const py::object& tensors, const std::string& op, const py::object& streams_arg) {
    const axrt_reduce_op_t reduce = parse_reduce_op(op);
    auto streams = streams_of(streams_arg);
    auto ins = operands(tensors, streams, "reduce_scatter");
    const axrt_tensor_info_t& info = ins[0].tensor->info();
    if (info.rank == 0 || info.shape[0] % static_cast<int64_t>(size()) != 0) {
      throw py::value_error("reduce_scatter: the tensors' first dimension (" +
                            std::string(info.rank ? std::to_string(info.shape[0]) : "none") +
                            ") must be a multiple of the group's " + std::to_string(size()) + " members");
    }
    std::vector<int64_t> shape(info.shape, info.shape + info.rank);
    shape[0] /= static_cast<int64_t>(size());
    auto outs = allocate(info, shape, streams);
    const auto members = members_of(streams, ins, outs);
    check(axrt_group_reduce_scatter(handle(), members.data(), info.element_count / size(), info.dtype,
                                    reduce));
    keep_until_done(ins, streams);
    return results(outs, streams);
  }

  // Copies each (source, destination) pair's source into its destination:
  // tensors of two different members, alike; returns the destinations.
  py::list send_recv(const py::object& pairs, const py::object& streams_arg) {
    auto streams = streams_of(streams_arg);
    std::vector<axrt_group_transfer_t> transfers;
    std::vector<Operand> keep;
    std::vector<std::shared_ptr<Tensor>> destinations;
    for (py::handle item : pairs) {
      const py::sequence pair = item.cast<py::sequence>();
      if (pair.size() != 2) throw py::value_error("send_recv: each pair is (source, destination)");
      auto src = pair[0].cast<std::shared_ptr<Tensor>>();
      auto dst = pair[1].cast<std::shared_ptr<Tensor>>();
      const size_t src_rank = rank_of(src->device()), dst_rank = rank_of(dst->device());
      if (src->info().dtype != dst->info().dtype || shape_text(src->info()) != shape_text(dst->info()) ||
          !src->info().contiguous || !dst->info().contiguous) {
        throw py::value_error("send_recv: a pair's tensors are contiguous and alike; the source is " +
                              std::string(axrt_dtype_name(src->info().dtype)) + shape_text(src->info()) +
                              ", the destination " + axrt_dtype_name(dst->info().dtype) +
                              shape_text(dst->info()));
      }
      if (dst->read_only()) throw py::value_error("send_recv: a destination is read-only");
      for (auto& [t, r] : {std::pair{src, src_rank}, std::pair{dst, dst_rank}}) {
        if (t->producer()) {
          order_after(t->producer()->handle(), streams[r]->handle(), t->producer()->device()->handle());
        }
      }
      Operand s = operand_of(src), d = operand_of(dst);
      transfers.push_back({src_rank, streams[src_rank]->handle(), s.buffer.get(), s.offset, dst_rank,
                           streams[dst_rank]->handle(), d.buffer.get(), d.offset, src->info().element_count,
                           src->info().dtype});
      keep.push_back(std::move(s));
      keep.push_back(std::move(d));
      destinations.push_back(dst);
    }
    check(axrt_group_send_recv(handle(), transfers.data(), transfers.size()));
    py::list out;
    for (size_t i = 0; i < transfers.size(); ++i) {
      keep[2 * i].tensor->set_producer(streams[transfers[i].src_rank]);
      destinations[i]->set_producer(streams[transfers[i].dst_rank]);
      out.append(py::cast(destinations[i]));
    }
    return out;
  }

 private:
  size_t rank_of(const std::shared_ptr<Device>& device) const {
    for (size_t r = 0; r < size(); ++r) {
      if (devices_[r] == device) return r;
    }
    throw py::value_error("send_recv: a tensor on " + device->id() + ", which is not a member of the group");
  }

  // The inputs of an out-of-place collective are read until it completes:
  // their producer becomes the member's stream, so that work queued after
  // them on other streams waits for the collective.
  static void keep_until_done(const std::vector<Operand>& ins, const std::vector<std::shared_ptr<Stream>>& streams) {
    for (size_t r = 0; r < ins.size(); ++r) ins[r].tensor->set_producer(streams[r]);
  }

  std::vector<std::shared_ptr<Device>> devices_;
  axrt_group_t group_ = nullptr;
};

}  // namespace

const char* text_or_null(const py::object& value, std::string* storage) {
  if (value.is_none()) return nullptr;
  *storage = value.cast<std::string>();
  return storage->c_str();
}

py::dict group_info(axrt_group_t group) {
  axrt_group_info_t info = AXRT_GROUP_INFO_INIT;
  check(axrt_group_query_info(group, &info));
  const bool aborted = info.state == AXRT_GROUP_STATE_ABORTED;
  py::dict d;
  d["label"] = std::string(info.label);
  d["backend"] = std::string(info.backend);
  d["size"] = info.size;
  if (info.rank >= 0) d["rank"] = info.rank;
  d["state"] = aborted ? "aborted" : "active";
  d["failed_rank"] = info.failed_rank >= 0 ? py::object(py::int_(info.failed_rank)) : py::object(py::none());
  d["failure_code"] =
      aborted ? py::object(py::str(axrt_status_code_name(info.failure_code))) : py::object(py::none());
  d["failure"] = aborted ? py::object(py::str(info.failure)) : py::object(py::none());
  d["collectives"] = info.collectives;
  return d;
}

axrt_reduce_op_t parse_reduce_op(const std::string& op) {
  if (op == "sum") return AXRT_REDUCE_SUM;
  if (op == "max") return AXRT_REDUCE_MAX;
  if (op == "min") return AXRT_REDUCE_MIN;
  throw py::value_error("op must be \"sum\", \"max\" or \"min\", not \"" + op + "\"");
}

uint64_t timeout_ns(const py::object& seconds, const char* what) {
  if (seconds.is_none()) return 0;
  const double s = seconds.cast<double>();
  if (std::isinf(s) && s > 0) return UINT64_MAX;
  if (!(s > 0)) throw py::value_error(std::string(what) + " must be None or a number of seconds > 0");
  const double ns = s * 1e9;
  return ns >= 1.8e19 ? UINT64_MAX : std::max<uint64_t>(1, static_cast<uint64_t>(ns));
}

axrt_group_t group_handle(const py::handle& group) {
  if (axrt_group_t member = group_member_handle(group)) return member;
  if (!py::isinstance<Group>(group)) {
    throw py::type_error("a channel is bound to an axrt.Group (axrt.group(devices)) or an "
                         "axrt.GroupMember (axrt.init_group()), not " +
                         py::str(py::type::handle_of(group).attr("__name__")).cast<std::string>());
  }
  return group.cast<const Group&>().handle();
}

void init_group(py::module_& m) {
  py::class_<Group, std::shared_ptr<Group>>(m, "Group", R"doc(
A device group: collectives across the devices of this process.

Made by ``axrt.group(devices)``; rank i is ``devices[i]``. Each collective
takes one tensor per member (on the member's device; anything else is
copied there first), queues its work on each member's stream (the device's
default stream, or ``streams=``) after the work that writes the tensors, and
returns without waiting: the results' reads wait for it as any tensor's do.
A member that fails (its stream failed, it does not arrive within
``timeout`` seconds, ``abort()``) aborts the group: its collectives raise
``axrt.AbortedError`` (or ``DeadlineExceededError``) naming the member, and
``info()`` says which. An aborted group stays aborted: close it and make a
new one on the devices that remain.)doc")
      .def_property_readonly("size", &Group::size, "The number of members.")
      .def_property_readonly("devices", &Group::devices, "The members' devices, in rank order.")
      .def("info", &Group::info,
           "A dict: label, backend, size, state ('active' or 'aborted'), failed_rank, failure_code, "
           "failure (the message), collectives (queued so far).")
      .def("all_reduce", &Group::all_reduce, py::arg("tensors"), py::arg("op") = "sum",
           py::arg("streams") = py::none(),
           "Reduces the members' tensors element-wise (op: 'sum', 'max', 'min') into each of them, in "
           "place; returns them.")
      .def("all_gather", &Group::all_gather, py::arg("tensors"), py::arg("streams") = py::none(),
           "New tensors on every member: the members' tensors concatenated along axis 0, rank 0 first.")
      .def("reduce_scatter", &Group::reduce_scatter, py::arg("tensors"), py::arg("op") = "sum",
           py::arg("streams") = py::none(),
           "New tensors: member r's is block r (along axis 0) of the members' reduced tensors.")
      .def("broadcast", &Group::broadcast, py::arg("tensors"), py::arg("root") = 0,
           py::arg("streams") = py::none(), "Copies member `root`'s tensor into the others', in place; returns them.")
      .def("send_recv", &Group::send_recv, py::arg("pairs"), py::arg("streams") = py::none(),
           "Copies each (source, destination) pair's source into its destination, tensors of two "
           "members, as one operation; returns the destinations.")
      .def(
          "send",
          [](Group& g, py::object src, py::object dst, py::object streams) {
            py::list pairs;
            pairs.append(py::make_tuple(src, dst));
            py::list out = g.send_recv(pairs, streams);
            return py::object(out[0]);
          },
          py::arg("src"), py::arg("dst"), py::arg("streams") = py::none(),
          "Sends tensor `src` (on one member) into tensor `dst` (on another); returns `dst`.")
      .def("abort", &Group::abort, py::arg("rank") = py::none(), py::arg("reason") = py::none(),
           "Aborts the group as if member `rank` (None: no member) had failed with `reason`.")
      .def("close", &Group::close, "Destroys the group; queued collectives still run.")
      .def("__enter__", [](std::shared_ptr<Group> g) { return g; })
      .def("__exit__", [](Group& g, py::args) { g.close(); })
      .def("__repr__", [](const Group& g) {
        std::string ids;
        for (const auto& d : g.devices()) ids += (ids.empty() ? "" : ", ") + d->id();
        return "<axrt.Group [" + ids + "]>";
      });

  m.def(
      "group",
      [](py::object devices, py::object label, py::object timeout, py::object backend) {
        return std::make_shared<Group>(devices, label, timeout, backend);
      },
      py::arg("devices"), py::kw_only(), py::arg("label") = py::none(), py::arg("timeout") = py::none(),
      py::arg("backend") = py::none(),
      "A device group of `devices` (names such as 'cpu:1' or axrt.Device objects). `timeout`: seconds "
      "a member waits for the others at a collective (default 300); `backend`: 'cpu' or 'nccl' "
      "(default: the members' driver's).");
}

}  // namespace axrt_py
