# Writes OUT (a header with ROCELAB_COMMIT) from `git describe` of SOURCE, touching it only
# when the commit changed, so every build knows its commit without rebuilding everything.
execute_process(COMMAND git -C "${SOURCE}" describe --always --dirty --abbrev=12
                OUTPUT_VARIABLE commit OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR commit STREQUAL "")
  set(commit "unknown (not a git checkout)")
endif()
file(WRITE "${OUT}.tmp" "#pragma once\n#define ROCELAB_COMMIT \"${commit}\"\n")
execute_process(COMMAND ${CMAKE_COMMAND} -E copy_if_different "${OUT}.tmp" "${OUT}")
file(REMOVE "${OUT}.tmp")
