# Checks that the parts of a test program split by axrt_unit_test(PARTS)
# together list every test case it runs by default, each once:
#   cmake -DPROGRAM=<test program> -DSPECS=<spec;spec;...> -P parts_cover.cmake
function(list_tests out)
  execute_process(COMMAND ${PROGRAM} --list-test-names-only ${ARGN}
    OUTPUT_VARIABLE text RESULT_VARIABLE status)
  # Catch2 exits with the number of test cases it listed.
  if(NOT status MATCHES "^[0-9]+$")
    message(FATAL_ERROR "${PROGRAM} --list-test-names-only ${ARGN} failed (${status})")
  endif()
  string(REPLACE "\n" ";" names "${text}")
  list(FILTER names EXCLUDE REGEX "^$")
  set(${out} ${names} PARENT_SCOPE)
endfunction()

list_tests(all)
set(covered)
foreach(spec IN LISTS SPECS)
  separate_arguments(args UNIX_COMMAND "${spec}")
  list_tests(part ${args})
  list(APPEND covered ${part})
endforeach()
list(SORT all)
list(SORT covered)
if(NOT all STREQUAL covered)
  set(missing ${all})
  list(REMOVE_ITEM missing ${covered})
  message(FATAL_ERROR "the parts of ${PROGRAM} do not run each test case once: "
                      "missing [${missing}], parts list ${covered}")
endif()
list(LENGTH all count)
message(STATUS "the parts run all ${count} test cases of ${PROGRAM}, each once")
