# Who may include what (docs/architecture.md, "Layers"). Every source and
# header of a layer is read; an include of another layer's file that the
# table below does not allow fails the check, naming the file, the line and
# the rule. Includes of the same folder ("npz.h") and of system or
# third-party headers (<fmt/format.h>) are not the check's business.
# Usage: cmake -DSOURCE_DIR=<project root> -P check_layers.cmake
cmake_minimum_required(VERSION 3.25)

# layer folder -> what its files may include (a folder ending in / allows
# everything under it, anything else is one file). Listed most specific
# first: a file belongs to the first layer whose folder holds it. `<driver>`
# stands for the driver's own folder.
set(layers
  "include/axrt/"
  "runtime/drivers/*/"
  "runtime/"
  "base/"
  "trace/"
  "format/"
  "kernels/"
  "serving/"
  "group/"
  "tools/axrt/"
  "bindings/python/"
  "examples/"
  "abi/cts/"
  "fuzz/")
set(allowed_include/axrt/ "axrt/")
set(allowed_base/ "axrt/" "base/")
set(allowed_trace/ "axrt/" "base/" "trace/")
set(allowed_format/ "axrt/" "base/" "format/")
set(allowed_kernels/ "axrt/" "base/" "kernels/")
# Drivers see the driver interface and nothing else of the core.
set(allowed_runtime/drivers/*/ "axrt/" "base/" "runtime/driver.h" "runtime/object.h"
  "runtime/caching_pool.h" "trace/trace.h" "<driver>")
# The core sees everything below it, but no driver's insides.
set(allowed_runtime/ "axrt/" "base/" "trace/trace.h" "format/" "kernels/cpu/library.h" "runtime/api.h"
  "runtime/buffer.h" "runtime/caching_pool.h" "runtime/call.h" "runtime/debug_calls.h"
  "runtime/driver.h" "runtime/executable.h" "runtime/handle_table.h" "runtime/host_code.h"
  "runtime/instance.h" "runtime/kernel_library.h" "runtime/loader.h" "runtime/object.h"
  "runtime/tensor.h")
# The serving engine is a client of the public API inside the library.
# It records its steps into a running trace.
set(allowed_serving/ "axrt/" "base/" "trace/trace.h" "serving/")
# Device groups too: a client of the public API inside the library.
set(allowed_group/ "axrt/" "base/" "trace/trace.h" "group/")
# The tool is a client of the public API that also reads files itself.
set(allowed_tools/axrt/ "axrt/" "base/" "format/" "tools/axrt/")
# Clients of the public API only.
set(allowed_bindings/python/ "axrt/")
set(allowed_examples/ "axrt/")
set(allowed_abi/cts/ "axrt/" "abi/cts/" "tests/support/" "kernels/cpu/library.h"
  "examples/custom_kernel/")
set(allowed_fuzz/ "axrt/" "base/" "format/")

# The project's top-level folders and the public header root: an include
# that starts with one of these is the project's own.
set(own_roots axrt base trace format kernels runtime serving group tools bindings abi tests fuzz examples)

set(failures 0)
foreach(layer IN LISTS layers)
  string(REPLACE "*" "[^/]+" layer_regex "^${layer}")
  file(GLOB_RECURSE files RELATIVE ${SOURCE_DIR}
    ${SOURCE_DIR}/${layer}*.h ${SOURCE_DIR}/${layer}*.c ${SOURCE_DIR}/${layer}*.cc
    ${SOURCE_DIR}/${layer}*.cu ${SOURCE_DIR}/${layer}*.cuh ${SOURCE_DIR}/${layer}*.inc)
  foreach(file IN LISTS files)
    if(NOT file MATCHES "${layer_regex}")
      continue()
    endif()
    # The first matching layer owns the file.
    set(owner "")
    foreach(candidate IN LISTS layers)
      string(REPLACE "*" "[^/]+" candidate_regex "^${candidate}")
      if(file MATCHES "${candidate_regex}")
        set(owner ${candidate})
        break()
      endif()
    endforeach()
    if(NOT owner STREQUAL layer)
      continue()
    endif()
    set(allowed ${allowed_${layer}})
    if(layer STREQUAL "runtime/drivers/*/")
      string(REGEX MATCH "^runtime/drivers/[^/]+/" own "${file}")
      list(TRANSFORM allowed REPLACE "^<driver>$" "${own}")
    endif()
    file(STRINGS ${SOURCE_DIR}/${file} lines REGEX "^[ \t]*#[ \t]*include[ \t]*[<\"]")
    foreach(line IN LISTS lines)
      string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*[<\"]([^>\"]*)[>\"].*$" "\\1" path "${line}")
      string(REGEX MATCH "^[^/]+" root "${path}")
      if(NOT path MATCHES "/" OR NOT root IN_LIST own_roots)
        continue()
      endif()
      set(ok FALSE)
      foreach(rule IN LISTS allowed)
        if((rule MATCHES "/$" AND path MATCHES "^${rule}") OR path STREQUAL rule)
          set(ok TRUE)
          break()
        endif()
      endforeach()
      if(NOT ok)
        list(JOIN allowed ", " allowed_text)
        message(SEND_ERROR "${file}: includes \"${path}\"; files of ${layer} may include only ${allowed_text}")
        math(EXPR failures "${failures} + 1")
      endif()
    endforeach()
  endforeach()
endforeach()
if(failures EQUAL 0)
  message(STATUS "layers: every include is allowed")
endif()
