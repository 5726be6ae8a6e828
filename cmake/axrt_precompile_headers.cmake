# axrt_precompile_headers(<target> [FORMAT])
#
# With AXRT_PRECOMPILE_HEADERS on, the standard library and fmt headers the
# library's files share, and with FORMAT the .axe schema's generated code
# (FlatBuffers), are parsed once per target instead of once per file: about
# half the compile time of a typical file of the runtime, whose own code is
# small beside them. Off by default, so that a tree built without it (the
# release tree of `make test`, every install) proves that each file includes
# what it uses and that no layer reaches the format unseen; the sanitizer
# trees of `make test` turn it on. Only for targets whose sources are C++.
option(AXRT_PRECOMPILE_HEADERS
  "Precompile the headers the library's files share (faster builds; a file's missing include goes unnoticed)"
  OFF)

function(axrt_precompile_headers target)
  if(NOT AXRT_PRECOMPILE_HEADERS)
    return()
  endif()
  cmake_parse_arguments(ARG "FORMAT" "" "" ${ARGN})
  set(headers <algorithm> <atomic> <cstdint> <cstring> <filesystem> <functional> <memory>
    <mutex> <span> <string> <string_view> <vector> <fmt/format.h> <fmt/ranges.h>)
  if(ARG_FORMAT)
    list(APPEND headers <format/axe_generated.h>)
  endif()
  target_precompile_headers(${target} PRIVATE ${headers})
endfunction()
