// The kernel-library conformance kit (docs/kernel-abi.md §8): checks any CPU
// kernel library against the kernel ABI, through the public C API only.
//
// A library author supplies the table and a few sample problems (kernel
// cases); the kit then checks
//   - the table: sizes, names, parameter tables, argument block sizes
//     (CheckLibraryTable);
//   - the lifecycle when executables load it: init once per device, deinit
//     once after the last executable, init's state in every dispatch
//     (CheckLibraryLifecycle);
//   - every case: run through the runtime (builder -> .axe -> load ->
//     invoke) with the author's `check` on the results, and called directly
//     over every workgroup in forward, reverse and shuffled order into
//     guarded copies of the buffers: identical results in every order,
//     nothing written outside the buffers or into read-only ones, every
//     output byte written, every workgroup contributing, and the direct
//     results equal to the runtime's (RunKernelCase).
// RunKernelLibraryKit does all of it. Failures are Catch2 CHECKs whose INFO
// names the kernel, the case, the parameter or workgroup and the offset.
//
// Usage, in a Catch2 test of the conformance suite:
//   TEST_CASE_METHOD(DeviceTest, "kit: my library", "[kit]") {
//     CTS_REQUIRE_FEATURE(Feature::kHostKernels);
//     std::vector<KernelCase> cases = {...};
//     RunKernelLibraryKit(*this, my_library_table(), cases);
//   }
#ifndef AXRT_ABI_CTS_KERNEL_LIBRARY_KIT_H_
#define AXRT_ABI_CTS_KERNEL_LIBRARY_KIT_H_

#include <cstdint>
#include <cstring>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "abi/cts/cts_fixture.h"

namespace axrt_cts {

// The data of one BUFFER parameter of a kernel case.
struct CaseBuffer {
  // The initial contents; the buffer's size is bytes.size(), at least 1.
  std::vector<uint8_t> bytes;
  // The kernel writes it. A read-only buffer is a function input of the
  // runtime executable (access READ); a writable one a function output
  // supplied pre-filled with `bytes` (access WRITE, or READ_WRITE when not
  // fully_written).
  bool writable = false;
  // Writable only: the kernel writes every byte whatever the buffer held
  // before (§8 "writes every output element"). Clear it for a buffer the
  // kernel updates in place or writes only in part; the kit then checks
  // only that each workgroup changes it.
  bool fully_written = true;
  // For a parameter whose library declaration names a layout_id: the
  // quantization layout the executable's parameter declares (its layout_id
  // must be the library's). Borrowed: it must outlive the kit's run.
  const axrt_axe_quant_layout_t* layout = nullptr;
};

// A read-only buffer holding `bytes`.
CaseBuffer InputBuffer(std::vector<uint8_t> bytes, const axrt_axe_quant_layout_t* layout = nullptr);
// A writable buffer of `size` bytes, initially zero, every byte of which the
// kernel writes.
CaseBuffer OutputBuffer(size_t size);

// One sample problem for one kernel.
struct KernelCase {
  std::string kernel;       // the kernel's name in the library
  std::string description;  // for messages ("n = 100"); may be empty
  axrt_kernel_dim3_t grid = {1, 1, 1};
  // One per BUFFER parameter, in parameter order.
  std::vector<CaseBuffer> buffers;
  // One per SCALAR parameter, in parameter order: the value's bytes as a
  // little-endian integer (a float's bit pattern, see F32Bits). Bits above
  // the scalar's size must be 0. The runtime refuses signed values with the
  // sign bit set (format §6.2: a binding is an unsigned expression that must
  // fit the type), so a case cannot pass a negative integer.
  std::vector<uint64_t> scalars;
  // Bytes of dynamic shared memory per workgroup (the kernel's
  // dynamic_shared_memory in the executable; scratch in the direct calls).
  uint32_t dynamic_shared_memory = 0;
  // Checks the results of the runtime run (of the forward direct run when
  // KitOptions::run_through_runtime is false): the final contents of every
  // buffer of the case, in buffer order (read-only ones included). Uses
  // Catch2 assertions. May be empty.
  std::function<void(std::span<const std::vector<uint8_t>> buffers)> check;
};

// How the runtime part of the kit reaches the library.
struct KitOptions {
  enum class Reach {
    // The kit registers the table in the test's instance under its name
    // (so the table must outlive that instance; a static one does).
    kRegister,
    // The test's instance already has a library of that name (the built-in
    // library, or one the test registered), which the kit names.
    kAlreadyRegistered,
    // The executable embeds `host_shared_object` (an ELF shared object for
    // the host whose query answers this table) as a HOST_SHARED_OBJECT code
    // object and loads with AXRT_EXECUTABLE_LOAD_FLAG_ALLOW_HOST_CODE.
    kEmbedded,
  };
  Reach reach = Reach::kRegister;
  std::vector<uint8_t> host_shared_object;
  // What the direct calls' dispatches report as worker_count; worker ids
  // cycle below it.
  uint32_t worker_count = 3;
  // The coverage check drops each workgroup of grids up to this size, and
  // this many evenly spread ones of bigger grids.
  uint32_t max_coverage_samples = 64;
  bool check_lifecycle = true;
  // Clear to run only the direct calls: for a library the device cannot
  // load, or a deliberately broken kernel (the kit's self-tests) that must
  // not write outside a runtime buffer.
  bool run_through_runtime = true;
};

// The table rules of docs/kernel-abi.md §1 and §4. Thread-compatible.
void CheckLibraryTable(const axrt_kernel_library_t* library);

// At most this many CheckLibraryLifecycle calls may run at once: the ABI's
// init and deinit take no user context, so the kit wraps them with one of a
// fixed pool of static trampolines, each bound to one library while a check
// runs.
inline constexpr int kLifecycleSlots = 4;

// Registers, in a fresh instance of the driver under test, a copy of
// `library` named "<name>.kit_lifecycle" whose init and deinit count their
// calls (and call the library's own, when it has them) and which carries one
// extra kernel that reports the dispatch's library_state. Loads two
// executables declaring the library's kernels (those without layout_id) and
// calling the extra kernel, and checks: init ran once, with the device's id;
// deinit did not run until the last executable was released, then once,
// with init's state; both executables' dispatches saw init's state; a third
// load initialises again. The instance is released before it returns, so
// the copy's slot is free again.
void CheckLibraryLifecycle(const DeviceTest& test, const axrt_kernel_library_t* library);

// Runs one case: through the runtime, then directly (see the top of this
// file). `library` must pass CheckLibraryTable.
void RunKernelCase(const DeviceTest& test, const axrt_kernel_library_t* library,
                   const KernelCase& kernel_case, const KitOptions& options = {});

// CheckLibraryTable, CheckLibraryLifecycle (when options.check_lifecycle),
// and RunKernelCase for every case; warns about kernels without a case.
void RunKernelLibraryKit(const DeviceTest& test, const axrt_kernel_library_t* library,
                         std::span<const KernelCase> cases, const KitOptions& options = {});

// ---------------------------------------------------------------------------
// Helpers for writing cases
// ---------------------------------------------------------------------------

// The bytes of `values`.
template <typename T>
std::vector<uint8_t> BytesOf(const std::vector<T>& values) {
  std::vector<uint8_t> bytes(values.size() * sizeof(T));
  if (!bytes.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

// `bytes` read as Ts (the tail that does not fill a T is dropped).
template <typename T>
std::vector<T> ValuesOf(const std::vector<uint8_t>& bytes) {
  std::vector<T> values(bytes.size() / sizeof(T));
  if (!values.empty()) std::memcpy(values.data(), bytes.data(), values.size() * sizeof(T));
  return values;
}

// A float's bit pattern, for KernelCase::scalars.
uint64_t F32Bits(float value);

}  // namespace axrt_cts

#endif  // AXRT_ABI_CTS_KERNEL_LIBRARY_KIT_H_
