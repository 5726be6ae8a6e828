# Generates the CPU library's parameter tables from kernels/contracts.json,
# the one statement of every built-in kernel's contract (docs/architecture.md,
# "Adding a kernel"): axrt_kernel_contracts(<json> <output .inc> <listing>)
# writes, for each kernel, its parameter table and a check of its argument
# struct's size against it, and AXRT_CPU_KERNEL_TABLE, the library's entries
# in the file's order; and <listing>, the same as plain text for the tests
# (a kernel a line: its name, then cuda:<entry> when its contract's
# cuda_entry names another kernel's CUDA entry point, then each parameter as
# name:buffer[:layout] or name:scalar:type). A contract with `cpu_prepacked`
# ({"param", "layout", "packer"}) also gets a second entry in the table, the
# CPU body `<name>_prepacked` listed as `<name>@<layout>` with that
# parameter reading the pre-packed layout, and a row of
# AXRT_CPU_PREPACK_TABLE naming it, the canonical layout and the packer
# (kernels/cpu/prepack.h); the listing leaves it out (it has no CUDA body).
# Runs at configure time; editing the JSON reconfigures.
function(axrt_kernel_contracts json output listing)
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${json})
  file(READ ${json} text)
  string(JSON count LENGTH "${text}" kernels)
  math(EXPR last "${count} - 1")
  set(out "// Generated from kernels/contracts.json by cmake/axrt_kernel_contracts.cmake.\n")
  set(table "#define AXRT_CPU_KERNEL_TABLE")
  set(prepacks "#define AXRT_CPU_PREPACK_TABLE")
  set(lines "")
  foreach(i RANGE ${last})
    string(JSON name GET "${text}" kernels ${i} name)
    string(JSON args GET "${text}" kernels ${i} args)
    string(JSON cuda_entry ERROR_VARIABLE no_cuda_entry GET "${text}" kernels ${i} cuda_entry)
    string(JSON params LENGTH "${text}" kernels ${i} params)
    math(EXPR plast "${params} - 1")
    set(list "")
    set(line "${name}")
    if(NOT no_cuda_entry AND NOT cuda_entry STREQUAL name)
      string(APPEND line " cuda:${cuda_entry}")
    endif()
    string(JSON packed_param ERROR_VARIABLE no_prepacked GET "${text}" kernels ${i}
           cpu_prepacked param)
    set(packed_list "")
    set(packed_index -1)
    if(no_prepacked)
      set(packed_param "")
    else()
      string(JSON packed_layout GET "${text}" kernels ${i} cpu_prepacked layout)
      string(JSON packer GET "${text}" kernels ${i} cpu_prepacked packer)
    endif()
    foreach(p RANGE ${plast})
      string(JSON pname GET "${text}" kernels ${i} params ${p} name)
      if(pname STREQUAL packed_param)
        string(JSON layout ERROR_VARIABLE no_layout GET "${text}" kernels ${i} params ${p} layout)
        if(no_layout)
          message(FATAL_ERROR "${json}: ${name}: cpu_prepacked names ${pname}, which declares "
                              "no layout to pack from")
        endif()
        set(packed_index ${p})
        set(packed_from "${layout}")
        list(APPEND packed_list "buffer(\"${pname}\", \"${packed_layout}\")")
      endif()
      string(JSON scalar ERROR_VARIABLE no_scalar GET "${text}" kernels ${i} params ${p} scalar)
      if(no_scalar)
        string(JSON layout ERROR_VARIABLE no_layout GET "${text}" kernels ${i} params ${p} layout)
        if(no_layout)
          list(APPEND list "buffer(\"${pname}\")")
          string(APPEND line " ${pname}:buffer")
        else()
          list(APPEND list "buffer(\"${pname}\", \"${layout}\")")
          string(APPEND line " ${pname}:buffer:${layout}")
        endif()
        if(NOT pname STREQUAL packed_param)
          list(GET list -1 entry)
          list(APPEND packed_list "${entry}")
        endif()
      elseif(scalar STREQUAL "uint64")
        list(APPEND list "u64(\"${pname}\")")
        list(APPEND packed_list "u64(\"${pname}\")")
        string(APPEND line " ${pname}:scalar:uint64")
      elseif(scalar STREQUAL "float32")
        list(APPEND list "scalar(\"${pname}\", AXRT_DTYPE_FLOAT32)")
        list(APPEND packed_list "scalar(\"${pname}\", AXRT_DTYPE_FLOAT32)")
        string(APPEND line " ${pname}:scalar:float32")
      else()
        message(FATAL_ERROR "${json}: ${name} parameter ${pname}: scalar type '${scalar}' is not "
                            "one the CPU library's tables take (uint64, float32)")
      endif()
    endforeach()
    list(JOIN list ", " joined)
    string(APPEND out "constexpr auto kParams_${name} = params(${joined});\n")
    string(APPEND out "static_assert(block_size(kParams_${name}) == sizeof(cpu::${args}), "
                      "\"${name}: cpu::${args} is not the block its contract describes\");\n")
    string(APPEND table " \\\n    kernel<cpu::${args}>(\"${name}\", ${name}, kParams_${name}),")
    string(APPEND lines "${line}\n")
    if(NOT no_prepacked)
      if(packed_index LESS 0)
        message(FATAL_ERROR "${json}: ${name}: cpu_prepacked names '${packed_param}', which is "
                            "not one of its parameters")
      endif()
      list(JOIN packed_list ", " joined)
      string(APPEND out "constexpr auto kParams_${name}_prepacked = params(${joined});\n")
      string(APPEND table " \\\n    kernel<cpu::${args}>(\"${name}@${packed_layout}\", "
                          "${name}_prepacked, kParams_${name}_prepacked),")
      string(APPEND prepacks " \\\n    CpuPrepack{\"${name}\", ${packed_index}, "
                             "\"${packed_from}\", \"${packed_layout}\", "
                             "\"${name}@${packed_layout}\", &cpu::${packer}},")
    endif()
  endforeach()
  string(APPEND out "${table}\n")
  string(APPEND out "${prepacks}\n")
  file(CONFIGURE OUTPUT ${output} CONTENT "${out}" @ONLY)
  file(CONFIGURE OUTPUT ${listing} CONTENT "${lines}" @ONLY)
endfunction()
