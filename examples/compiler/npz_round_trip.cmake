# cmake -DCOMPILER=... -DRUNNER=... -DWORK=dir -P npz_round_trip.cmake
#
# Weights generated from a seed and saved as .npz (--save-weights), then
# compiled again from that file (--weights): the .axe and the reference must
# be identical byte for byte, and axrt_mlp must pass on them.
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  message(STATUS "${out}${err}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${ARGN}: exit status ${rc}")
  endif()
endfunction()

set(sizes --in 96 --hidden 256 --out 40)
run(${COMPILER} --seed 7 ${sizes} --save-weights ${WORK}/weights.npz
    -o ${WORK}/seeded.axe --reference ${WORK}/seeded.ref)
run(${COMPILER} --seed 7 --weights ${WORK}/weights.npz
    -o ${WORK}/loaded.axe --reference ${WORK}/loaded.ref)
foreach(ext axe ref)
  execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files ${WORK}/seeded.${ext} ${WORK}/loaded.${ext}
                  RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "seeded.${ext} and loaded.${ext} differ: the .npz did not carry the weights")
  endif()
endforeach()
run(${RUNNER} --iterations 10 ${WORK}/loaded.axe ${WORK}/loaded.ref)
