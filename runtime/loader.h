// The loader, one concern a file; executable.cc runs the steps in order.
// The pre-flight steps check everything and allocate or initialise
// nothing; residency follows only when they all passed.
//
//   loader_kernels.cc    kernels: for each, the first implementation the
//                        device runs (a library's CPU kernel or device code),
//                        checked against the device (pre-flight); then the
//                        libraries initialised on the device (residency)
//   loader_functions.cc  functions: literal grids against the device's limits
//                        (pre-flight); each function compiled into command
//                        templates (residency)
//   loader_constants.cc  constants: views of the mapped file on host devices,
//                        one uploaded buffer on the others (residency)
//   loader_prepack.cc    pre-packed weights on host devices: the kernels
//                        that run a library's pre-packed form (pre-flight),
//                        the packed copies of their constants (residency)
#ifndef AXRT_RUNTIME_LOADER_H_
#define AXRT_RUNTIME_LOADER_H_

#include <memory>
#include <string>
#include <vector>

#include "format/reader.h"
#include "runtime/driver.h"
#include "runtime/executable.h"
#include "runtime/kernel_library.h"

namespace axrt {

// What every step of one load reads.
struct LoadContext {
  Device* device;
  Instance* instance;
  const axe::AxeFile& file;
  const axe::Executable& meta;  // file.metadata()
  const LoadParams& params;
  std::string name;  // the label, or the file's name

  // "executable 'mlp.axe'"
  std::string what() const { return fmt::format("executable '{}'", name); }
  // Takes `status` (may be NULL) and puts "executable 'x': " in front.
  axrt_status_t prefix(axrt_status_t status) const;
  bool device_runs_host_code() const { return device->properties.type == AXRT_DEVICE_TYPE_CPU; }
};

// One implementation of a kernel: the primary fields or a variant.
struct Implementation {
  uint32_t code_object;
  const flatbuffers::String* entry_symbol;
  const axe::Dim3* workgroup_size;
  uint32_t dynamic_shared_memory;
  const axe::Dim3* cluster_dims;  // may be null
};

// The implementation pre-flight chose for one kernel.
struct ResolvedKernel {
  std::shared_ptr<KernelLibrary> library;  // host code, or
  std::shared_ptr<DeviceCode> code;        // device code
  DeviceKernel device_kernel;
  const axrt_kernel_info_t* info = nullptr;
  Implementation impl{};
  uint32_t args_size = 0;
  std::vector<uint32_t> param_offsets;
  std::vector<uint32_t> param_sizes;
  // Set by choose_prepacked(): `info` is then the library's pre-packed form
  // and the constants its parameter is bound to, `packed_constants`, are
  // bound in its layout.
  const KernelLibrary::Prepack* prepack = nullptr;
  std::vector<uint32_t> packed_constants;
};

// Pre-flight: an implementation for every kernel, or every reason there is
// none.
axrt_status_t resolve_kernels(const LoadContext& ctx, std::vector<ResolvedKernel>* out);
// Residency: `exe->kernels` from `resolved`, initialising each library on
// the device once for the executable.
axrt_status_t load_kernels(const LoadContext& ctx, std::vector<ResolvedKernel>& resolved,
                           Executable* exe);

// Pre-flight: literal workgroup counts against the device's limits (the
// others are checked at every call).
axrt_status_t check_dispatches(const LoadContext& ctx);
// Residency: `exe->functions`, compiled into command templates over the
// loaded kernels and resident constants.
axrt_status_t compile_functions(const LoadContext& ctx, Executable* exe);

// Residency: `exe->constants`.
axrt_status_t make_constants_resident(const LoadContext& ctx, Executable* exe);

// Pre-flight, host devices: the kernels to run in a pre-packed form (their
// `info` and `prepack` changed), unless AXRT_CPU_PREPACK=0.
void choose_prepacked(const LoadContext& ctx, std::vector<ResolvedKernel>* resolved);
// Residency: the packed copies (`exe->constants[i].packed`) of the
// constants bound to a pre-packed kernel's parameter, after
// make_constants_resident.
axrt_status_t pack_constants(const LoadContext& ctx, const std::vector<ResolvedKernel>& resolved,
                             Executable* exe);

// The code object kind in words ("CUDA cubin").
const char* code_object_kind_name(axe::CodeObjectKind kind);

}  // namespace axrt

#endif  // AXRT_RUNTIME_LOADER_H_
