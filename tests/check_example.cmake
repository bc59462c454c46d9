# Installs gemmtune into a scratch prefix, then configures, builds and runs examples/hello
# against the installed package with find_package(gemmtune), as a user would.
file(REMOVE_RECURSE ${WORK_DIR})
execute_process(COMMAND ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${WORK_DIR}/prefix
  RESULT_VARIABLE rc OUTPUT_QUIET)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cmake --install failed (${rc})")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -S ${SOURCE_DIR}/examples/hello -B ${WORK_DIR}/build
  -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "configuring examples/hello against the installed package failed (${rc})")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${WORK_DIR}/build RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "building examples/hello failed (${rc})")
endif()
# Without a GPU the example must still start, and fail with a clear message (exit code 2).
execute_process(COMMAND ${WORK_DIR}/build/hello RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message(STATUS "hello exited with ${rc}: ${out}${err}")
if(NOT (rc EQUAL 0 OR rc EQUAL 2))
  message(FATAL_ERROR "examples/hello failed unexpectedly (${rc})")
endif()
