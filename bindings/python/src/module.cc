// The extension module axrt._axrt (the package `axrt` re-exports it), and
// how threads meet the interpreter's exit (binding.h, Interpreter exit).
#include <chrono>
#include <condition_variable>
#include <thread>

#include "binding.h"

namespace axrt_py {
namespace {

struct ExitState {
  std::mutex mutex;
  std::condition_variable idle;
  bool exiting = false;
  std::thread::id exiting_thread;
  // Threads the exit waits for: past the check, not yet done with Python.
  uint64_t inside = 0;
};

// Never destroyed: axrt's threads may still read it while exit() runs the
// destructors of statics.
ExitState& exit_state() {
  static ExitState* state = new ExitState();
  return *state;
}

void leave(ExitState& s) {
  std::lock_guard<std::mutex> lock(s.mutex);
  if (--s.inside == 0) s.idle.notify_all();
}

// The atexit hook. It runs before CPython starts forcing threads out, and
// returns once no thread can still take the GIL; the GIL is released while
// it waits, so the threads it waits for can finish.
void close_at_exit() {
  ExitState& s = exit_state();
  PyThreadState* state = PyEval_SaveThread();
  {
    std::unique_lock<std::mutex> lock(s.mutex);
    s.exiting = true;
    s.exiting_thread = std::this_thread::get_id();
    s.idle.wait(lock, [&] { return s.inside == 0; });
  }
  PyEval_RestoreThread(state);
}

}  // namespace

ExitDelay::ExitDelay() {
  ExitState& s = exit_state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.exiting) return;
  ++s.inside;
  entered_ = true;
}

ExitDelay::~ExitDelay() {
  if (entered_) leave(exit_state());
}

PythonScope::PythonScope() {
  if (delay_.entered()) gil_ = PyGILState_Ensure();
}

PythonScope::~PythonScope() {
  if (delay_.entered()) PyGILState_Release(gil_);
}

GilRelease::GilRelease() : state_(PyEval_SaveThread()) {}

GilRelease::~GilRelease() {
  ExitState& s = exit_state();
  {
    std::unique_lock<std::mutex> lock(s.mutex);
    if (s.exiting && std::this_thread::get_id() != s.exiting_thread) {
      // Taking the GIL now would end in pthread_exit from this noexcept
      // destructor; the thread holds nothing and waits for the process's end.
      lock.unlock();
      for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
    }
    ++s.inside;
  }
  PyEval_RestoreThread(state_);
  leave(s);
}

void init_exit(py::module_&) {
  py::module_::import("atexit").attr("register")(py::cpp_function(&close_at_exit));
}

}  // namespace axrt_py

PYBIND11_MODULE(_axrt, m) {
  m.doc() = "axrt's C API bound for Python; import the package `axrt` instead.";
  m.attr("__version__") = axrt_version_string();
  axrt_py::init_exit(m);
  axrt_py::init_errors(m);
  axrt_py::init_dtypes(m);
  axrt_py::init_device(m);
  axrt_py::init_stream(m);
  axrt_py::init_tensor(m);
  axrt_py::init_dlpack(m);
  axrt_py::init_executable(m);
  axrt_py::init_trace(m);
  axrt_py::init_builder(m);
  axrt_py::init_serving(m);
  axrt_py::init_group(m);
  axrt_py::init_group_member(m);
}
