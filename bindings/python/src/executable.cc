// axrt.load, axrt.Executable and axrt.Function: calls from Python.
#include <algorithm>
#include <chrono>
#include <string>

#include "binding.h"

namespace axrt_py {
namespace {

struct Argument {
  std::string name;
  axrt_dtype_t dtype;
  std::vector<int64_t> dims;         // -1 where symbolic
  std::vector<std::string> symbols;  // the symbol's name where symbolic
  bool is_mutable = false;           // an input written in place (format 1.2)
};

class Function {
 public:
  Function(Handle<axrt_function_t> handle, std::shared_ptr<Device> device)
      : handle_(std::move(handle)), device_(std::move(device)) {
    axrt_function_info_t info = AXRT_FUNCTION_INFO_INIT;
    check(axrt_function_query_info(handle_.get(), &info));
    name_ = info.name;
    for (uint32_t s = 0; s < info.symbol_count; ++s) {
      const char* name = nullptr;
      uint64_t bound = 0;
      check(axrt_function_query_symbol(handle_.get(), s, &name, &bound));
      symbol_names_.emplace_back(name);
      symbol_bounds_.push_back(bound);
    }
    for (uint32_t i = 0; i < info.input_count; ++i) inputs_.push_back(argument(AXRT_ARGUMENT_KIND_INPUT, i));
    for (uint32_t i = 0; i < info.output_count; ++i) outputs_.push_back(argument(AXRT_ARGUMENT_KIND_OUTPUT, i));
  }

  const std::string& name() const { return name_; }
  const std::shared_ptr<Device>& device() const { return device_; }
  const std::vector<Argument>& inputs() const { return inputs_; }
  const std::vector<Argument>& outputs() const { return outputs_; }

  std::string signature() const {
    auto list = [](const std::vector<Argument>& args) {
      std::string s;
      for (size_t i = 0; i < args.size(); ++i) {
        if (i) s += ", ";
        s += args[i].name + ": " + (args[i].is_mutable ? "mutable " : "") +
             axrt_dtype_name(args[i].dtype) + "[";
        for (size_t d = 0; d < args[i].dims.size(); ++d) {
          if (d) s += ", ";
          s += args[i].dims[d] < 0 ? args[i].symbols[d] : std::to_string(args[i].dims[d]);
        }
        s += "]";
      }
      return s;
    };
    std::string s = name_ + "(" + list(inputs_) + ") -> ";
    s += outputs_.size() == 1 ? list(outputs_) : "(" + list(outputs_) + ")";
    for (size_t i = 0; i < symbol_names_.size(); ++i) {
      s += (i ? ", " : " where ") + symbol_names_[i] + " <= " + std::to_string(symbol_bounds_[i]);
    }
    return s;
  }

  py::object call(py::args args, py::object out, py::object stream_arg, bool check_finite,
                  py::object dump_dir, py::object channels) {
    if (args.size() != inputs_.size()) {
      throw py::type_error(name_ + "() takes " + std::to_string(inputs_.size()) + " input" +
                           (inputs_.size() == 1 ? "" : "s") + ", " + std::to_string(args.size()) +
                           " given: " + signature());
    }
    auto stream = resolve_stream(stream_arg, device_);
    const size_t n_in = inputs_.size(), n_out = outputs_.size();
    std::vector<std::shared_ptr<Tensor>> in_tensors(n_in);
    std::vector<Handle<axrt_tensor_t>> lent(n_in);
    std::vector<axrt_tensor_t> in(n_in);
    // Mutable inputs that are not axrt tensors: the call waits for the
    // writes, so the caller's array holds them when it returns.
    bool host_arrays_written = false;
    for (size_t i = 0; i < n_in; ++i) {
      const bool is_mutable = inputs_[i].is_mutable;
      if (is_mutable) {
        // Written in place: never a temporary copy, whose writes would be lost.
        const bool is_tensor = py::isinstance<Tensor>(args[i]);
        if (!is_tensor && !py::isinstance<py::array>(args[i]) && !py::hasattr(args[i], "__dlpack__")) {
          throw py::type_error("input " + std::to_string(i) + " ('" + inputs_[i].name + "') of " + name_ +
                               "() is mutable: pass an axrt.Tensor, a numpy array or a DLPack producer "
                               "that the call can write in place, not " +
                               py::str(py::type::handle_of(args[i]).attr("__name__")).cast<std::string>());
        }
        host_arrays_written |= !is_tensor;
      }
      // The common case first: a dense numpy array on a host device.
      if (device_->host_accessible() && py::isinstance<py::array>(args[i])) {
        py::array array = py::reinterpret_borrow<py::array>(args[i]);
        if (array.flags() & py::array::c_style) {
          lent[i] = lend_numpy(array);
          in[i] = lent[i].get();
          continue;
        }
      }
      in_tensors[i] = is_mutable ? to_tensor(args[i], device_, stream, true, AXRT_DTYPE_INVALID,
                                             "a mutable input")
                                 : to_tensor(args[i], device_, stream, false, inputs_[i].dtype);
      in[i] = in_tensors[i]->handle();
    }

    // out=: one object for one output, else a sequence with None where the
    // runtime should allocate.
    std::vector<py::object> out_objects(n_out, py::none());
    if (!out.is_none()) {
      if (n_out == 1 && !py::isinstance<py::tuple>(out) && !py::isinstance<py::list>(out)) {
        out_objects[0] = out;
      } else {
        py::sequence seq = out.cast<py::sequence>();
        if (seq.size() != n_out) {
          throw py::type_error(name_ + "() has " + std::to_string(n_out) + " outputs, out= gave " +
                               std::to_string(seq.size()));
        }
        for (size_t i = 0; i < n_out; ++i) out_objects[i] = seq[i];
      }
    }
    std::vector<std::shared_ptr<Tensor>> out_tensors(n_out);
    std::vector<axrt_tensor_t> outs(n_out, nullptr);
    bool host_arrays_out = false;
    for (size_t i = 0; i < n_out; ++i) {
      if (out_objects[i].is_none()) continue;
      if (!py::isinstance<Tensor>(out_objects[i])) host_arrays_out = true;
      out_tensors[i] = to_tensor(out_objects[i], device_, stream, true);
      outs[i] = out_tensors[i]->handle();
    }

    // check_finite= and dump_dir=: the debugging modes (docs/debugging.md).
    axrt_invoke_options_t options = AXRT_INVOKE_OPTIONS_INIT;
    std::string dump_directory;
    if (check_finite) options.flags |= AXRT_INVOKE_FLAG_CHECK_FINITE;
    if (!dump_dir.is_none()) {
      dump_directory = py::module_::import("os").attr("fsdecode")(dump_dir).cast<std::string>();
      options.flags |= AXRT_INVOKE_FLAG_DUMP;
      options.dump_directory = dump_directory.c_str();
    }
    // channels=: (group, rank) per channel of the function (format 1.4).
    std::vector<axrt_invoke_channel_t> bound;
    if (!channels.is_none()) {
      for (py::handle entry : channels) {
        py::tuple pair = py::reinterpret_borrow<py::object>(entry).cast<py::tuple>();
        if (pair.size() != 2) {
          throw py::type_error("channels= takes (group, rank) pairs, one per channel of " + name_);
        }
        bound.push_back({group_handle(pair[0]), pair[1].cast<uint32_t>()});
      }
      options.channels = bound.data();
      options.channel_count = bound.size();
    }
    axrt_status_t status;
    {
      GilRelease release;
      status = axrt_function_invoke(handle_.get(), stream->handle(), in.data(), n_in, outs.data(), n_out,
                                    options.flags || !bound.empty() ? &options : nullptr);
    }
    if (status) {
      // Outputs are written only on success; nothing to release.
      check(status);
    }
    for (size_t i = 0; i < n_in; ++i) {
      if (inputs_[i].is_mutable && in_tensors[i]) in_tensors[i]->set_producer(stream);
    }
    py::tuple results(n_out);
    for (size_t i = 0; i < n_out; ++i) {
      if (out_tensors[i]) {
        out_tensors[i]->set_producer(stream);
        results[i] = out_objects[i];
      } else {
        results[i] = py::cast(std::make_shared<Tensor>(Handle<axrt_tensor_t>::steal(outs[i]), device_, stream));
      }
    }
    // Arrays the runtime does not own are read by the caller directly.
    if (host_arrays_out || host_arrays_written) stream->synchronize();
    if (n_out == 1) return results[0];
    if (n_out == 0) return py::none();
    return results;
  }

 private:
  Argument argument(axrt_argument_kind_t kind, uint32_t index) {
    axrt_argument_info_t info = AXRT_ARGUMENT_INFO_INIT;
    check(axrt_function_query_argument(handle_.get(), kind, index, &info));
    Argument a{info.name, info.dtype, {}, {}, (info.flags & AXRT_ARGUMENT_FLAG_MUTABLE) != 0};
    for (uint32_t d = 0; d < info.rank; ++d) {
      a.dims.push_back(info.dims[d]);
      a.symbols.push_back(info.dim_symbols[d] >= 0 ? symbol_names_.at(info.dim_symbols[d]) : std::string());
    }
    return a;
  }

  friend double c_api_call_loop(Function&, py::args, uint64_t);
  Handle<axrt_function_t> handle_;
  std::shared_ptr<Device> device_;
  std::string name_;
  std::vector<std::string> symbol_names_;
  std::vector<uint64_t> symbol_bounds_;
  std::vector<Argument> inputs_, outputs_;
};

class Executable {
 public:
  Executable(Handle<axrt_executable_t> handle, std::shared_ptr<Device> device)
      : handle_(std::move(handle)), device_(std::move(device)) {
    check(axrt_executable_query_info(handle_.get(), &info_));
    for (uint32_t i = 0; i < info_.function_count; ++i) {
      Handle<axrt_function_t> f;
      check(axrt_executable_get_function(handle_.get(), i, f.out()));
      functions_.push_back(std::make_shared<Function>(std::move(f), device_));
    }
  }

  const std::shared_ptr<Device>& device() const { return device_; }
  axrt_executable_t handle() const { return handle_.get(); }
  const axrt_executable_info_t& info() const { return info_; }
  const std::vector<std::shared_ptr<Function>>& functions() const { return functions_; }

  // The file's free-form metadata, in file order (keys may repeat; a later
  // entry wins in the dict).
  py::dict metadata() const {
    py::dict d;
    for (uint32_t i = 0;; ++i) {
      const char* key = nullptr;
      const char* value = nullptr;
      size_t size = 0;
      axrt_status_t status = axrt_executable_get_metadata(handle_.get(), i, &key, &value, &size);
      if (status != nullptr && axrt_status_code(status) == AXRT_STATUS_CODE_OUT_OF_RANGE) {
        axrt_status_free(status);
        break;
      }
      check(status);
      d[py::str(key)] = py::str(value, size);
    }
    return d;
  }

  std::shared_ptr<Function> find(const std::string& name) const {
    for (const auto& f : functions_) {
      if (f->name() == name) return f;
    }
    // The runtime's message lists the functions there are.
    Handle<axrt_function_t> f;
    check(axrt_executable_find_function(handle_.get(), name.c_str(), f.out()));
    return std::make_shared<Function>(std::move(f), device_);
  }

 private:
  Handle<axrt_executable_t> handle_;
  std::shared_ptr<Device> device_;
  axrt_executable_info_t info_ = AXRT_EXECUTABLE_INFO_INIT;
  std::vector<std::shared_ptr<Function>> functions_;
};

// The benchmarks' baseline: `iterations` calls of `f` made straight through
// the C API (axrt_function_invoke, then releasing the results), with the
// inputs converted once. Returns the seconds they took.
double c_api_call_loop(Function& f, py::args args, uint64_t iterations) {
  auto stream = f.device_->default_stream();
  std::vector<std::shared_ptr<Tensor>> keep;
  std::vector<axrt_tensor_t> in;
  for (size_t i = 0; i < args.size(); ++i) {
    keep.push_back(to_tensor(args[i], f.device_, stream, false, f.inputs_.at(i).dtype));
    in.push_back(keep.back()->handle());
  }
  std::vector<axrt_tensor_t> out(f.outputs_.size());
  axrt_status_t status = nullptr;
  double seconds = 0;
  {
    GilRelease release;
    const auto start = std::chrono::steady_clock::now();
    for (uint64_t i = 0; i < iterations && !status; ++i) {
      std::fill(out.begin(), out.end(), nullptr);
      status = axrt_function_invoke(f.handle_.get(), stream->handle(), in.data(), in.size(), out.data(),
                                    out.size(), nullptr);
      for (axrt_tensor_t t : out) axrt_tensor_release(t);
    }
    if (!status) status = axrt_stream_synchronize(stream->handle());
    seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  check(status);
  return seconds;
}

py::list arguments(const std::vector<Argument>& args) {
  py::list out;
  for (const Argument& a : args) {
    py::list shape;
    for (size_t d = 0; d < a.dims.size(); ++d) {
      if (a.dims[d] < 0) {
        shape.append(a.symbols[d]);
      } else {
        shape.append(a.dims[d]);
      }
    }
    py::dict d;
    d["name"] = a.name;
    d["dtype"] = std::string(axrt_dtype_name(a.dtype));
    d["shape"] = py::tuple(shape);
    d["mutable"] = a.is_mutable;
    out.append(d);
  }
  return out;
}

py::object load(py::object source, py::object device, bool allow_native_code, bool verify_checksums) {
  auto d = resolve_device(device);
  axrt_executable_load_options_t options = AXRT_EXECUTABLE_LOAD_OPTIONS_INIT;
  if (allow_native_code) options.flags |= AXRT_EXECUTABLE_LOAD_FLAG_ALLOW_HOST_CODE;
  if (verify_checksums) options.flags |= AXRT_EXECUTABLE_LOAD_FLAG_VERIFY_CHECKSUMS;
  Handle<axrt_executable_t> exe;
  axrt_status_t status;
  if (py::isinstance<py::str>(source) || py::hasattr(source, "__fspath__")) {
    const std::string path =
        py::module_::import("os").attr("fsdecode")(py::module_::import("os").attr("fspath")(source)).cast<std::string>();
    GilRelease release;
    status = axrt_executable_load_file(d->handle(), path.c_str(), &options, exe.out());
  } else if (PyObject_CheckBuffer(source.ptr())) {
    py::buffer_info bytes = source.cast<py::buffer>().request();
    const auto size = static_cast<size_t>(bytes.size * bytes.itemsize);
    GilRelease release;
    status = axrt_executable_load_memory(d->handle(), bytes.ptr, size, &options, exe.out());
  } else {
    throw py::type_error("load() takes a path (str or os.PathLike) or the file's bytes; got " +
                         py::repr(py::type::handle_of(source)).cast<std::string>());
  }
  check(status);
  auto executable = std::make_shared<Executable>(std::move(exe), d);
  py::object obj = py::cast(executable);
  // Functions are attributes: exe.main resolves like any attribute.
  py::dict attrs = obj.attr("__dict__");
  for (const auto& f : executable->functions()) attrs[py::str(f->name())] = py::cast(f);
  return obj;
}

}  // namespace

axrt_executable_t executable_handle(const py::object& executable) {
  return executable.cast<const Executable&>().handle();
}

void init_executable(py::module_& m) {
  py::class_<Function, std::shared_ptr<Function>>(m, "Function", R"doc(
A function of a loaded executable. Call it with one array per input (any
DLPack producer, numpy array or axrt.Tensor); it returns axrt.Tensor results
on the executable's device (a tuple when there are several), queued on the
stream and ready when read.)doc")
      .def("__call__", &Function::call, py::arg("out") = py::none(), py::arg("stream") = py::none(),
           py::arg("check_finite") = false, py::arg("dump_dir") = py::none(),
           py::arg("channels") = py::none(), R"doc(
Queues one call. out=: a tensor (or, for several outputs, a sequence with
None where axrt should allocate) to write instead of allocating; writable
numpy arrays on the CPU work too, and the call then waits for the results.
A mutable input (format 1.2, signature 'mutable') is written in place: pass
an axrt.Tensor on the function's device, or a writable numpy array (CPU) or
DLPack producer of that device's memory, which the call updates without a
copy, waiting for the writes before it returns; a read-only one raises
axrt.InvalidArgumentError.
stream=: the axrt.Stream to queue on (None: the device's default stream).
check_finite=True: run the commands one at a time and fail the stream
(axrt.DataLossError when the results are read or the stream synchronised)
at the first command that writes a NaN or Inf, naming it. dump_dir=: an
existing directory; each command's writes go to .npy files in a folder of
it (docs/debugging.md). Both are slow, for debugging.
channels=: for a function with channels (format 1.4, collective commands), a
(group, rank) pair per channel: the axrt.Group the channel stands for and
the member this call runs as (the stream's device is that member's). Each
member calls its function with its own rank; the call's results are ready
once every member's part of each collective ran.)doc")
      .def_property_readonly("name", &Function::name, "The function's name.")
      .def_property_readonly("signature", &Function::signature,
                             "'main(x: f32[batch, 256]) -> y: f32[batch, 10] where batch <= 64'.")
      .def_property_readonly(
          "inputs", [](const Function& f) { return arguments(f.inputs()); },
          "Each input as a dict of name, dtype (axrt name), shape (ints, or symbol names) and "
          "mutable (written in place by the call).")
      .def_property_readonly(
          "outputs", [](const Function& f) { return arguments(f.outputs()); }, "Each output, as inputs.")
      .def_property_readonly("device", &Function::device, "The device it runs on.")
      .def("__repr__", [](const Function& f) { return "<axrt.Function " + f.signature() + ">"; });

  py::class_<Executable, std::shared_ptr<Executable>>(m, "Executable", py::dynamic_attr(), R"doc(
An .axe executable loaded onto a device. Its functions are attributes and
items: exe.main(x) and exe["main"](x).)doc")
      .def("__getitem__", &Executable::find, py::arg("name"),
           "The function `name`; axrt.NotFoundError lists the functions there are.")
      .def("__getattr__",
           [](const Executable& e, const std::string& name) -> std::shared_ptr<Function> {
             if (name.rfind("__", 0) != 0) {
               for (const auto& f : e.functions()) {
                 if (f->name() == name) return f;
               }
             }
             std::string names;
             for (const auto& f : e.functions()) names += (names.empty() ? "" : ", ") + f->name();
             throw py::attribute_error("executable '" + std::string(e.info().name) + "' has no function '" +
                                       name + "' (it has: " + names + ")");
           })
      .def("__contains__",
           [](const Executable& e, const std::string& name) {
             for (const auto& f : e.functions()) {
               if (f->name() == name) return true;
             }
             return false;
           })
      .def("__iter__",
           [](const Executable& e) {
             py::list names;
             for (const auto& f : e.functions()) names.append(f->name());
             return py::iter(names);
           })
      .def("__len__", [](const Executable& e) { return e.functions().size(); })
      .def_property_readonly(
          "functions",
          [](const Executable& e) {
            py::dict d;
            for (const auto& f : e.functions()) d[py::str(f->name())] = f;
            return d;
          },
          "The functions by name.")
      .def_property_readonly("name", [](const Executable& e) { return std::string(e.info().name); },
                             "The path, or '<memory>' for bytes.")
      .def_property_readonly(
          "producer",
          [](const Executable& e) {
            return py::make_tuple(std::string(e.info().producer_name), std::string(e.info().producer_version));
          },
          "(name, version) of the compiler that wrote the file.")
      .def_property_readonly("device", &Executable::device, "The device it was loaded on.")
      .def_property_readonly("metadata", &Executable::metadata,
                             "The file's free-form metadata: a dict of str to str.")
      .def_property_readonly(
          "constant_bytes", [](const Executable& e) { return e.info().constant_bytes; }, "Bytes of weights.")
      .def("__repr__", [](const Executable& e) {
        std::string s = "<axrt.Executable '" + std::string(e.info().name) + "' on " + e.device()->id();
        for (const auto& f : e.functions()) s += "\n  " + f->signature();
        return s + ">";
      });

  m.def("_c_api_call_loop", &c_api_call_loop, py::arg("function"), py::arg("iterations"),
        "Benchmark baseline: calls `function` `iterations` times straight through the C API with the "
        "inputs given once as positional arguments after it; returns the seconds taken.");
  m.def("load", &load, py::arg("source"), py::arg("device") = py::none(), py::kw_only(),
        py::arg("allow_native_code") = false, py::arg("verify_checksums") = false, R"doc(
Loads an .axe executable from a path (str or os.PathLike) or from its bytes
onto `device` (None: the default device; a name such as 'cuda:0'; an
axrt.Device). Files holding native host code are refused unless
allow_native_code=True, since their code runs in this process.
verify_checksums=True checks every segment's CRC-32C. Raises the runtime's
error, naming the file and the reason.)doc");
}

}  // namespace axrt_py
