# Writes OUT, a header defining LMTRAIN_COMMIT as the commit lmtrain is built from (`git describe --always
# --dirty`, or "unknown" outside a git checkout), and only when it changed, so a build after a new commit
# recompiles one small file. Run at every build by the `lmtrain_commit` target of CMakeLists.txt.
# Usage: cmake -DSOURCE_DIR=... -DOUT=... -P scripts/commit_header.cmake
execute_process(COMMAND git -C "${SOURCE_DIR}" describe --always --dirty --abbrev=12
                OUTPUT_VARIABLE commit OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR commit STREQUAL "")
  set(commit "unknown")
endif()
set(text "#define LMTRAIN_COMMIT \"${commit}\"\n")
set(old "")
if(EXISTS "${OUT}")
  file(READ "${OUT}" old)
endif()
if(NOT old STREQUAL text)
  file(WRITE "${OUT}" "${text}")
endif()
