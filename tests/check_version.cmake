# The `version` test: the version has one source, include/jitfit.h's JITFIT_VERSION
# (cmake/jitfit_version.cmake). Checks that this build's project version is the header's, that
# `jitfit version`, the shared library's file name and jitfit.pc say it too, and that a header
# whose macro is missing, repeated or not MAJOR.MINOR.PATCH stops a configure with FATAL_ERROR.
# Arguments: -DSRC_DIR -DBUILD_DIR -DPROJECT_VERSION -DJITFIT (the command) -DLIB (the shared
# library) -DWORK_DIR.
include(${SRC_DIR}/cmake/jitfit_version.cmake)
jf_read_version(${SRC_DIR}/include/jitfit.h header)
if(NOT header STREQUAL PROJECT_VERSION)
  message(FATAL_ERROR "include/jitfit.h says ${header}, the build was configured as "
                      "${PROJECT_VERSION}: reconfigure")
endif()

execute_process(COMMAND ${JITFIT} version OUTPUT_VARIABLE out RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR NOT out STREQUAL "jitfit ${PROJECT_VERSION}\n")
  message(FATAL_ERROR "`jitfit version` printed '${out}' (exit ${rc}), not 'jitfit ${PROJECT_VERSION}'")
endif()
get_filename_component(real ${LIB} REALPATH)
get_filename_component(name ${real} NAME)
if(NOT name STREQUAL "libjitfit.so.${PROJECT_VERSION}")
  message(FATAL_ERROR "the shared library is ${name}, not libjitfit.so.${PROJECT_VERSION}")
endif()
file(STRINGS ${BUILD_DIR}/jitfit.pc pc REGEX "^Version: ")
if(NOT pc STREQUAL "Version: ${PROJECT_VERSION}")
  message(FATAL_ERROR "jitfit.pc says '${pc}', not 'Version: ${PROJECT_VERSION}'")
endif()

# Headers the reader must refuse, and one it must read.
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
file(WRITE ${WORK_DIR}/read.cmake
     "include(${SRC_DIR}/cmake/jitfit_version.cmake)\n"
     "jf_read_version(\${HEADER} v)\n"
     "message(STATUS \"version \${v}\")\n")
set(bad_headers
    "/* no version */\n"
    "#define JITFIT_VERSION \"0.1\"\n"
    "#define JITFIT_VERSION \"0.1.0-rc1\"\n"
    "#define JITFIT_VERSION 010\n"
    "#define JITFIT_VERSION \"0.1.0\"\n#define JITFIT_VERSION \"0.2.0\"\n"
    "#  define JITFIT_VERSION \"0.2.0\"\n")
set(k 0)
foreach(text IN LISTS bad_headers)
  math(EXPR k "${k} + 1")
  file(WRITE ${WORK_DIR}/bad${k}.h "${text}")
  execute_process(COMMAND ${CMAKE_COMMAND} -DHEADER=${WORK_DIR}/bad${k}.h -P ${WORK_DIR}/read.cmake
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(rc EQUAL 0 OR NOT err MATCHES "bad${k}.h: expected one line")
    message(FATAL_ERROR "a header of '${text}' was accepted (exit ${rc}): ${out}${err}")
  endif()
endforeach()
file(WRITE ${WORK_DIR}/good.h "#ifndef X\n#define JITFIT_VERSION \"12.0.3\"\n#define JITFIT_VERSION_X 1\n#endif\n")
execute_process(COMMAND ${CMAKE_COMMAND} -DHEADER=${WORK_DIR}/good.h -P ${WORK_DIR}/read.cmake
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT out MATCHES "version 12\\.0\\.3")
  message(FATAL_ERROR "good.h was not read as 12.0.3 (exit ${rc}): ${out}${err}")
endif()
message(STATUS "version ${PROJECT_VERSION}: one source, checked")
