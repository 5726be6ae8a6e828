# Compares the dynamic symbols libaxrt defines with the functions the public
# headers declare. Fails when
#   - a defined symbol does not start with axrt_ (the version node, such as
#     AXRT_1.0, is the only exception),
#   - an axrt_ symbol is not bound to a version node of the linker script,
#   - a function declared with AXRT_API is not exported, or
#   - an exported axrt_ symbol is declared in no public header.
# Usage: cmake -DNM=<nm> -DLIBRARY=<libaxrt.so> -DINCLUDE_ROOT=<dir holding axrt/>
#              -P check_exports.cmake
cmake_minimum_required(VERSION 3.25)

foreach(var NM LIBRARY INCLUDE_ROOT)
  if(NOT ${var})
    message(FATAL_ERROR "check_exports: -D${var}=... is required")
  endif()
endforeach()

# --- What the headers declare -------------------------------------------
file(GLOB_RECURSE headers ${INCLUDE_ROOT}/axrt/*.h)
set(declared)
foreach(header IN LISTS headers)
  file(READ ${header} text)
  # Drop comments, so prose that mentions AXRT_API or a function is ignored.
  set(code "")
  while(TRUE)
    string(FIND "${text}" "/*" open)
    if(open EQUAL -1)
      string(APPEND code "${text}")
      break()
    endif()
    string(SUBSTRING "${text}" 0 ${open} before)
    string(APPEND code "${before} ")
    math(EXPR after "${open} + 2")
    string(SUBSTRING "${text}" ${after} -1 text)
    string(FIND "${text}" "*/" close)
    if(close EQUAL -1)
      message(FATAL_ERROR "${header}: unterminated comment")
    endif()
    math(EXPR after "${close} + 2")
    string(SUBSTRING "${text}" ${after} -1 text)
  endwhile()
  string(REGEX REPLACE "//[^\n]*" "" code "${code}")
  # Drop preprocessor lines (with their continuations): the definition of
  # AXRT_API itself is not a declaration.
  string(REGEX REPLACE "\n[ \t]*#([^\n\\\\]|\\\\[^\n]|\\\\\n)*" "\n" code "\n${code}")

  # A declaration reads `AXRT_API <return type> <name>(`.
  string(REGEX MATCHALL "AXRT_API[^;(]*\\(" declarations "${code}")
  foreach(declaration IN LISTS declarations)
    if(NOT declaration MATCHES "([A-Za-z_][A-Za-z0-9_]*)[ \t\r\n]*\\($")
      message(FATAL_ERROR "${header}: cannot read a function name in '${declaration}'")
    endif()
    list(APPEND declared ${CMAKE_MATCH_1})
  endforeach()
endforeach()
list(REMOVE_DUPLICATES declared)
list(LENGTH declared declared_count)
if(declared_count EQUAL 0)
  message(FATAL_ERROR "no AXRT_API functions found under ${INCLUDE_ROOT}/axrt")
endif()

# --- What the library exports ---------------------------------------------
execute_process(COMMAND ${NM} -D --defined-only ${LIBRARY}
  OUTPUT_VARIABLE nm_output ERROR_VARIABLE nm_error RESULT_VARIABLE nm_result)
if(NOT nm_result EQUAL 0)
  message(FATAL_ERROR "${NM} -D --defined-only ${LIBRARY} failed: ${nm_error}")
endif()
string(REPLACE "\n" ";" nm_lines "${nm_output}")

set(exported)
set(problems)
set(saw_versions FALSE)
foreach(line IN LISTS nm_lines)
  if(line STREQUAL "")
    continue()
  endif()
  if(NOT line MATCHES "^[0-9A-Fa-f]*[ \t]+([A-Za-z?])[ \t]+([^ \t]+)$")
    message(FATAL_ERROR "cannot read nm line '${line}'")
  endif()
  set(type ${CMAKE_MATCH_1})
  set(symbol ${CMAKE_MATCH_2})
  # nm prints a versioned symbol as name@@NODE (default) or name@NODE.
  set(version "")
  if(symbol MATCHES "^([^@]+)(@@?.*)$")
    set(symbol ${CMAKE_MATCH_1})
    set(version ${CMAKE_MATCH_2})
    set(saw_versions TRUE)
  endif()
  if(type STREQUAL "A" AND symbol MATCHES "^AXRT_[0-9]+(\\.[0-9]+)*$")
    continue()
  endif()
  if(NOT symbol MATCHES "^axrt_")
    list(APPEND problems "exported symbol '${symbol}' (nm type ${type}) does not start with axrt_")
    continue()
  endif()
  list(APPEND exported ${symbol})
  set(version_of_${symbol} "${version}")
endforeach()

# An nm too old to print versions prints none; then there is nothing to check.
if(saw_versions)
  foreach(symbol IN LISTS exported)
    if(NOT version_of_${symbol} MATCHES "^@@AXRT_[0-9]")
      list(APPEND problems "exported symbol '${symbol}' is not bound to an AXRT_ version node (nm shows '${symbol}${version_of_${symbol}}')")
    endif()
  endforeach()
endif()

foreach(function IN LISTS declared)
  if(NOT function IN_LIST exported)
    list(APPEND problems "'${function}' is declared AXRT_API in the headers but not exported")
  endif()
endforeach()
foreach(symbol IN LISTS exported)
  if(NOT symbol IN_LIST declared)
    list(APPEND problems "'${symbol}' is exported but declared in no public header")
  endif()
endforeach()

list(LENGTH exported exported_count)
list(LENGTH problems problem_count)
if(problem_count GREATER 0)
  list(JOIN problems "\n  " text)
  message(FATAL_ERROR "${problem_count} export problem(s) in ${LIBRARY}:\n  ${text}")
endif()
message(STATUS "${exported_count} exported symbol(s) match the ${declared_count} AXRT_API function(s) of the headers")
