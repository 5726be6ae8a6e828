# axrt_add_driver(<name>
#   DOC "<what the driver is>"            the help text of its option
#   [DEFAULT ON|OFF]                      the option's default (ON)
#   SOURCES <file>...                     relative to the calling folder
#   [CTS_UNSUPPORTED <file>]              what the conformance suite skips
#   [NO_DEVICES]                          a driver that never has a device
#   [LINK_LIBRARIES <lib>...])
#
# Called from a driver folder's CMakeLists.txt (runtime/drivers/<name>/, or a
# folder named in AXRT_EXTERNAL_DRIVERS). Declares the option
# AXRT_DRIVER_<NAME>; when it is on, compiles the sources into an object
# library linked into libaxrt and records the driver for the generated
# registry, which refers to the factory the sources define as
# AXRT_DRIVER_FACTORY(<name>) (runtime/driver.h). Drivers enumerate in the
# order they are added: the CPU driver first, then the other in-tree drivers
# by name, then external ones in the order listed.
#
# The CTS_UNSUPPORTED file lists, one AXRT_CTS_UNSUPPORTED(kFeature,
# "reason") per line, the optional capabilities of abi/cts/unsupported.h
# the driver lacks; the conformance suite runs once per enabled driver
# (`cts.<name>`) and skips exactly those, naming the reason. A NO_DEVICES
# driver (an example of the build's plumbing, which finds no hardware by
# design) gets no conformance run: one that could never find its device
# would check nothing.
function(axrt_add_driver name)
  cmake_parse_arguments(ARG "NO_DEVICES" "DOC;DEFAULT;CTS_UNSUPPORTED" "SOURCES;LINK_LIBRARIES"
    ${ARGN})
  if(NOT name MATCHES "^[a-z][a-z0-9_]*$")
    message(FATAL_ERROR "axrt_add_driver: '${name}' is not a driver name (lower case, digits, _)")
  endif()
  if(NOT DEFINED ARG_DEFAULT)
    set(ARG_DEFAULT ON)
  endif()
  string(TOUPPER "${name}" upper)
  option(AXRT_DRIVER_${upper} "Build ${ARG_DOC}" ${ARG_DEFAULT})
  if(NOT AXRT_DRIVER_${upper})
    return()
  endif()
  get_property(known GLOBAL PROPERTY AXRT_DRIVERS)
  if(name IN_LIST known)
    message(FATAL_ERROR "axrt_add_driver: driver '${name}' is added twice")
  endif()
  if(NOT ARG_SOURCES)
    message(FATAL_ERROR "axrt_add_driver(${name}): no SOURCES")
  endif()
  set(target axrt_driver_${name})
  add_library(${target} OBJECT ${ARG_SOURCES})
  target_link_libraries(${target} PRIVATE axrt_runtime_interface ${ARG_LINK_LIBRARIES})
  target_compile_options(${target} PRIVATE ${AXRT_WARNINGS})
  axrt_precompile_headers(${target})
  set_property(GLOBAL APPEND PROPERTY AXRT_DRIVERS ${name})
  set_property(GLOBAL APPEND PROPERTY AXRT_DRIVER_TARGETS ${target})
  if(ARG_NO_DEVICES)
    set_property(GLOBAL PROPERTY AXRT_DRIVER_NO_DEVICES_${name} TRUE)
  endif()
  if(ARG_CTS_UNSUPPORTED)
    get_filename_component(file "${ARG_CTS_UNSUPPORTED}" ABSOLUTE)
    if(NOT EXISTS "${file}")
      message(FATAL_ERROR "axrt_add_driver(${name}): CTS_UNSUPPORTED file ${file} not found")
    endif()
    set_property(GLOBAL PROPERTY AXRT_DRIVER_CTS_UNSUPPORTED_${name} "${file}")
  endif()
endfunction()
