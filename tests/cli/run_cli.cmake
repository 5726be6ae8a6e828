# Runs the `axrt` tool once and checks what it did.
#   TOOL          the axrt executable
#   ARGS          its arguments, separated by '|'
#   EXIT          the exit status expected
#   STDOUT        substrings stdout must contain, separated by '|'
#   STDERR        substrings stderr must contain, separated by '|'
#   JSON_GET      when set, stdout must parse as JSON and the member path
#                 (separated by '|', such as "constants|0|name") must exist
#   JSON_EXPECT   the value expected at JSON_GET, unless empty
#   CLEAN         a directory removed before the tool runs
#   COMPARE       pairs of files, separated by '|', that must be identical
#                 after the tool ran: "written|expected|written|expected"
foreach(var TOOL EXIT)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "run_cli.cmake: ${var} is not set")
  endif()
endforeach()

# Splits `text` at '|' into the list `out`. Needles are not run through
# list(): an unbalanced '[' in one ("arena [0, 4096)") would glue list
# elements together.
function(split_bars text out)
  set(items "")
  set(rest "${text}")
  while(NOT rest STREQUAL "")
    string(FIND "${rest}" "|" bar)
    if(bar EQUAL -1)
      set(item "${rest}")
      set(rest "")
    else()
      string(SUBSTRING "${rest}" 0 ${bar} item)
      math(EXPR next "${bar} + 1")
      string(SUBSTRING "${rest}" ${next} -1 rest)
    endif()
    # Semicolons and brackets inside an item are escaped for the list.
    string(REPLACE ";" "\\;" item "${item}")
    list(APPEND items "${item}")
  endwhile()
  set(${out} "${items}" PARENT_SCOPE)
endfunction()

# Checks that `haystack` contains every '|'-separated needle of `needles`.
function(check_contains stream haystack needles)
  set(rest "${needles}")
  while(NOT rest STREQUAL "")
    string(FIND "${rest}" "|" bar)
    if(bar EQUAL -1)
      set(needle "${rest}")
      set(rest "")
    else()
      string(SUBSTRING "${rest}" 0 ${bar} needle)
      math(EXPR next "${bar} + 1")
      string(SUBSTRING "${rest}" ${next} -1 rest)
    endif()
    string(FIND "${haystack}" "${needle}" at)
    if(at EQUAL -1)
      set(failures "${failures}${stream} lacks '${needle}'\n" PARENT_SCOPE)
      set(failures "${failures}${stream} lacks '${needle}'\n")
    endif()
  endwhile()
endfunction()

split_bars("${ARGS}" args)
if(DEFINED CLEAN AND NOT CLEAN STREQUAL "")
  file(REMOVE_RECURSE "${CLEAN}")
endif()
execute_process(COMMAND ${TOOL} ${args}
  RESULT_VARIABLE status
  OUTPUT_VARIABLE out
  ERROR_VARIABLE err)

set(failures "")
if(NOT status STREQUAL EXIT)
  string(APPEND failures "exit status ${status}, expected ${EXIT}\n")
endif()
check_contains(stdout "${out}" "${STDOUT}")
check_contains(stderr "${err}" "${STDERR}")
if(DEFINED JSON_GET AND NOT JSON_GET STREQUAL "")
  split_bars("${JSON_GET}" path)
  string(JSON value ERROR_VARIABLE json_error GET "${out}" ${path})
  if(json_error)
    string(APPEND failures "JSON: ${json_error}\n")
  elseif(NOT JSON_EXPECT STREQUAL "" AND NOT value STREQUAL JSON_EXPECT)
    string(APPEND failures "JSON ${JSON_GET} is '${value}', expected '${JSON_EXPECT}'\n")
  endif()
endif()
if(DEFINED COMPARE AND NOT COMPARE STREQUAL "")
  split_bars("${COMPARE}" files)
  list(LENGTH files count)
  math(EXPR last "${count} - 1")
  foreach(i RANGE 0 ${last} 2)
    math(EXPR j "${i} + 1")
    list(GET files ${i} written)
    list(GET files ${j} expected)
    if(NOT EXISTS "${written}")
      string(APPEND failures "${written} was not written\n")
    else()
      execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files "${written}" "${expected}"
                      RESULT_VARIABLE differ)
      if(NOT differ EQUAL 0)
        string(APPEND failures "${written} differs from ${expected}\n")
      endif()
    endif()
  endforeach()
endif()

if(failures)
  message(FATAL_ERROR "axrt ${ARGS}:\n${failures}--- stdout ---\n${out}--- stderr ---\n${err}")
endif()
