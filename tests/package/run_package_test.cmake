# Driver of the package test (see CMakeLists.txt beside it). Every step runs
# in WORK_DIR, which is wiped first so each run starts from nothing.
cmake_minimum_required(VERSION 3.25)

foreach(var BUILD_DIR WORK_DIR CONSUMER_SOURCE_DIR GENERATOR C_COMPILER INSTALL_LIBDIR)
  if("${${var}}" STREQUAL "")
    message(FATAL_ERROR "run_package_test: -D${var}=... is required")
  endif()
endforeach()

set(prefix ${WORK_DIR}/prefix)
if(IS_ABSOLUTE "${INSTALL_LIBDIR}")
  set(libdir ${INSTALL_LIBDIR})
else()
  set(libdir ${prefix}/${INSTALL_LIBDIR})
endif()

# Runs a command and stops the test with its output when it fails.
function(step what)
  list(JOIN ARGN " " command_line)
  message(STATUS "${what}: ${command_line}")
  execute_process(COMMAND ${ARGN}
    RESULT_VARIABLE result OUTPUT_VARIABLE output ERROR_VARIABLE output)
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "${what} failed (${result}):\n${output}")
  endif()
  string(STRIP "${output}" output)
  set(step_output "${output}" PARENT_SCOPE)
endfunction()

file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})

set(config_args)
set(build_type Release)
if(NOT "${CONFIG}" STREQUAL "")
  set(config_args --config ${CONFIG})
  set(build_type ${CONFIG})
endif()
step("install" ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix} ${config_args})

# --- find_package(axrt) ---------------------------------------------------
set(flag_args)
if(NOT "${EXTRA_FLAGS}" STREQUAL "")
  set(flag_args "-DCMAKE_C_FLAGS=${EXTRA_FLAGS}" "-DCMAKE_EXE_LINKER_FLAGS=${EXTRA_FLAGS}")
endif()
step("configure consumer" ${CMAKE_COMMAND}
  -S ${CONSUMER_SOURCE_DIR} -B ${WORK_DIR}/consumer-build
  -G ${GENERATOR}
  -DCMAKE_C_COMPILER=${C_COMPILER}
  -DCMAKE_BUILD_TYPE=${build_type}
  -DCMAKE_PREFIX_PATH=${prefix}
  ${flag_args})
# The consumer must have found the package just installed, not another one.
if(NOT step_output MATCHES "axrt [0-9.]+ found in ([^\n]*)")
  message(FATAL_ERROR "consumer configure did not report where axrt came from:\n${step_output}")
endif()
set(found_in "${CMAKE_MATCH_1}")
string(FIND "${found_in}" "${prefix}/" at)
if(NOT at EQUAL 0)
  message(FATAL_ERROR "consumer found axrt in ${found_in}, not under ${prefix}")
endif()
step("build consumer" ${CMAKE_COMMAND} --build ${WORK_DIR}/consumer-build ${config_args})
find_program(consumer NAMES axrt_consumer
  PATHS ${WORK_DIR}/consumer-build ${WORK_DIR}/consumer-build/${CONFIG}
  NO_DEFAULT_PATH NO_CACHE)
if(NOT consumer)
  message(FATAL_ERROR "axrt_consumer was not built under ${WORK_DIR}/consumer-build")
endif()
step("run consumer (find_package)"
  ${CMAKE_COMMAND} -E env LD_LIBRARY_PATH=${libdir} ${consumer})
message(STATUS "${step_output}")

# --- pkg-config -------------------------------------------------------------
if("${PKG_CONFIG}" STREQUAL "")
  message(STATUS "pkg-config not found: the pkg-config half is skipped")
  return()
endif()
set(pc_env ${CMAKE_COMMAND} -E env PKG_CONFIG_PATH=${libdir}/pkgconfig)
step("pkg-config --modversion" ${pc_env} ${PKG_CONFIG} --modversion axrt)
string(STRIP "${step_output}" pc_version)
step("pkg-config --cflags --libs" ${pc_env} ${PKG_CONFIG} --cflags --libs axrt)
string(STRIP "${step_output}" pc_flags)
# The flags must point into the prefix: a .pc that kept the configure-time
# prefix would build against whatever is installed there instead.
if(NOT pc_flags MATCHES "-I[^ ]*" OR NOT pc_flags MATCHES "-L[^ ]*")
  message(FATAL_ERROR "pkg-config gave no -I and -L flags: '${pc_flags}'")
endif()
foreach(flag IN ITEMS I L)
  string(REGEX MATCH "-${flag}([^ ]*)" ignored "${pc_flags}")
  get_filename_component(dir "${CMAKE_MATCH_1}" REALPATH)
  get_filename_component(real_prefix "${prefix}" REALPATH)
  string(FIND "${dir}/" "${real_prefix}/" at)
  if(NOT at EQUAL 0)
    message(FATAL_ERROR "pkg-config -${flag} points to ${dir}, outside ${prefix}: '${pc_flags}'")
  endif()
endforeach()
separate_arguments(pc_flag_list UNIX_COMMAND "${pc_flags}")
separate_arguments(extra_flag_list UNIX_COMMAND "${EXTRA_FLAGS}")
set(pc_binary ${WORK_DIR}/pkgconfig-build/axrt_consumer)
file(MAKE_DIRECTORY ${WORK_DIR}/pkgconfig-build)
step("compile with pkg-config flags" ${C_COMPILER} -std=c11 -Wall -Wextra -Werror
  ${extra_flag_list}
  "-DAXRT_CONSUMER_PACKAGE_VERSION=\"${pc_version}\""
  ${CONSUMER_SOURCE_DIR}/main.c -o ${pc_binary} ${pc_flag_list})
step("run consumer (pkg-config)"
  ${CMAKE_COMMAND} -E env LD_LIBRARY_PATH=${libdir} ${pc_binary})
message(STATUS "${step_output}")
