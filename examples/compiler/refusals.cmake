# cmake -DCOMPILER=... -DRUNNER=... -DMAKE_NPZ=... -DWORK=dir -P refusals.cmake
#
# axrt_mlp_compiler refuses what it cannot read with a message naming the
# archive, the entry and the reason (exit status 1), and bad command lines
# with exit status 2; in neither case does it leave an .axe behind. axrt_mlp
# fails (exit status 1) on a result outside the bound and on a model it
# cannot load, and refuses bad command lines (exit status 2).
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})
execute_process(COMMAND ${MAKE_NPZ} ${WORK} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "axrt_mlp_make_test_npz failed (${rc})")
endif()

set(failures 0)
# expect_from(PROGRAM EXIT_STATUS REGEX ARGS...): REGEX is matched against
# the program's standard error.
function(expect_from program status regex)
  file(REMOVE ${WORK}/out.axe)
  execute_process(COMMAND ${program} ${ARGN}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  get_filename_component(name ${program} NAME)
  set(what "${name} ${ARGN}")
  if(NOT rc EQUAL status)
    message(SEND_ERROR "${what}: exit status ${rc}, expected ${status}\n${out}${err}")
  elseif(NOT err MATCHES "${regex}")
    message(SEND_ERROR "${what}: the message does not match '${regex}':\n${err}")
  elseif(status GREATER 0 AND EXISTS ${WORK}/out.axe)
    message(SEND_ERROR "${what}: failed but wrote out.axe")
  elseif(status EQUAL 0)
    message(STATUS "accepted: ${what}")
  else()
    string(STRIP "${err}" err)
    message(STATUS "refused as expected (${rc}): ${err}")
  endif()
endfunction()

# expect(EXIT_STATUS REGEX ARGS...): the compiler, writing out.axe.
function(expect status regex)
  expect_from(${COMPILER} ${status} "${regex}" ${ARGN} -o ${WORK}/out.axe)
endfunction()

# The valid archive first, so that a refusal below is the fault's doing.
expect(0 "^$" --weights ${WORK}/good.npz)

expect(1 "compressed.npz'.*entry 'fc1.weight.npy' is compressed \\(deflate, method 8\\); only stored entries"
       --weights ${WORK}/compressed.npz)
expect(1 "entry 'fc2.bias.npy' holds dtype '<f8'; only little-endian float32"
       --weights ${WORK}/float64.npz)
expect(1 "entry 'fc1.bias.npy' holds dtype '>f4'" --weights ${WORK}/big_endian.npz)
expect(1 "entry 'fc2.weight.npy' is in Fortran order" --weights ${WORK}/fortran_order.npz)
expect(1 "entry 'fc1.bias.npy' is .npy version 3.0; only versions 1.0 and 2.0"
       --weights ${WORK}/npy_version_3.npz)
expect(1 "entry 'fc1.weight.npy': shape \\(128, 16\\) of float32 needs 8192 bytes, but the entry holds 8188"
       --weights ${WORK}/short_payload.npz)
expect(1 "no array 'fc2.bias' \\(the archive holds: fc1.bias, fc1.weight, fc2.weight\\)"
       --weights ${WORK}/missing_array.npz)
expect(1 "array 'fc1.bias' has shape \\[129\\].*need \\[128\\]" --weights ${WORK}/wrong_shape.npz)
expect(1 "array 'fc2.weight' element 5 is nan; weights must be finite" --weights ${WORK}/nan.npz)
expect(1 "hidden = 100 is not a multiple of 128" --weights ${WORK}/hidden_100.npz)
expect(1 "entry 'fc1.bias.npy' is damaged: its data has CRC-32 0x[0-9a-f]+, the archive records"
       --weights ${WORK}/flipped_byte.npz)
expect(1 "truncated.npz': not a zip archive" --weights ${WORK}/truncated.npz)
expect(1 "not_a_zip.npz': not a zip archive" --weights ${WORK}/not_a_zip.npz)
expect(1 "absent.npz': cannot open: No such file" --weights ${WORK}/absent.npz)
expect(1 "CUDA fatbin: '.*absent.fatbin': cannot open" --cuda-fatbin ${WORK}/absent.fatbin)

# The command line: exit status 2.
expect(2 "--in 17 disagrees with the weights in '.*good.npz' \\(16\\)"
       --weights ${WORK}/good.npz --in 17)
expect(2 "--hidden takes a non-negative integer, not 'lots'" --hidden lots)
expect(2 "unknown option '--fast'" --fast)
expect(2 "--batch-max 2 is below the reference batch of 4" --batch-max 2)
expect(2 "--in/--hidden/--out: hidden = 1000 is not a multiple of 128" --hidden 1000)
expect(2 "--in/--hidden/--out: out = 12 is not a multiple of 8" --out 12)
expect_from(${COMPILER} 2 "no output file: give -o MODEL.axe" --seed 3)

# axrt_mlp: the reference of a model of other weights (of the same sizes)
# is outside the bound; a missing model fails to load.
expect_from(${COMPILER} 0 "^$" --weights ${WORK}/good.npz
            -o ${WORK}/good.axe --reference ${WORK}/good.ref)
expect_from(${COMPILER} 0 "^$" --seed 2 --in 16 --hidden 128 --out 8
            -o ${WORK}/other.axe --reference ${WORK}/other.ref)
expect_from(${RUNNER} 0 "^$" --iterations 1 ${WORK}/good.axe ${WORK}/good.ref)
expect_from(${RUNNER} 1 "elements outside their bound; the first, y\\[0\\]\\[[0-9]+\\]"
            ${WORK}/good.axe ${WORK}/other.ref)
expect_from(${RUNNER} 1 "axrt_executable_load_file failed: NOT_FOUND: .*absent.axe"
            ${WORK}/absent.axe ${WORK}/good.ref)
expect_from(${RUNNER} 1 "absent.ref: No such file"
            ${WORK}/good.axe ${WORK}/absent.ref)
expect_from(${RUNNER} 2 "usage: axrt_mlp" ${WORK}/good.axe)
expect_from(${RUNNER} 2 "--iterations takes a count" --iterations 0 ${WORK}/good.axe ${WORK}/good.ref)
