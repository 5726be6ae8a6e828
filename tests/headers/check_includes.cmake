# Checks the rules every public header follows (see STYLE.md): it includes
# only <stddef.h>, <stdint.h>, <stdbool.h> and other axrt headers (and
# axrt/dlpack.h also <dlpack/dlpack.h>, whose types it exchanges), has an
# include guard, and wraps its declarations in extern "C" guards.
# Usage: cmake -DINCLUDE_ROOT=<dir holding axrt/> -P check_includes.cmake
cmake_minimum_required(VERSION 3.25)

file(GLOB_RECURSE headers RELATIVE ${INCLUDE_ROOT} ${INCLUDE_ROOT}/axrt/*.h)
set(allowed_system "<stddef.h>" "<stdint.h>" "<stdbool.h>")
list(JOIN allowed_system ", " allowed_text)

foreach(header IN LISTS headers)
  file(READ ${INCLUDE_ROOT}/${header} text)
  string(REGEX MATCHALL "#[ \t]*include[ \t]*[<\"][^>\"]*[>\"]" includes "${text}")
  foreach(line IN LISTS includes)
    string(REGEX REPLACE "^#[ \t]*include[ \t]*" "" target "${line}")
    if(target MATCHES "^<")
      if(header STREQUAL "axrt/dlpack.h" AND target STREQUAL "<dlpack/dlpack.h>")
        continue()
      endif()
      if(NOT target IN_LIST allowed_system)
        message(SEND_ERROR "${header}: includes ${target}; public headers may include only ${allowed_text} and axrt headers")
      endif()
    else()
      string(REGEX REPLACE "^\"(.*)\"$" "\\1" path "${target}")
      if(NOT path MATCHES "^axrt/" OR NOT EXISTS ${INCLUDE_ROOT}/${path})
        message(SEND_ERROR "${header}: includes \"${path}\", which is not a public axrt header (write \"axrt/<name>.h\")")
      endif()
    endif()
  endforeach()

  if(NOT text MATCHES "#ifndef[ \t]+(AXRT_[A-Z0-9_]+_H_)[ \t\r]*\n#define[ \t]+AXRT_[A-Z0-9_]+_H_")
    message(SEND_ERROR "${header}: no include guard of the form #ifndef AXRT_<NAME>_H_ / #define")
  endif()
  if(text MATCHES "AXRT_API" AND NOT text MATCHES "extern \"C\"")
    message(SEND_ERROR "${header}: declares functions but has no extern \"C\" guard")
  endif()
endforeach()

list(LENGTH headers count)
message(STATUS "checked ${count} public header(s)")
