# The `install` test: installs the current build tree into a fresh prefix, then builds
# examples/embed.c against the installed library twice — with pkg-config and with CMake's
# find_package(jitfit) — and runs both programs. Arguments: -DBUILD_DIR -DSRC_DIR -DWORK_DIR.
set(prefix ${WORK_DIR}/prefix)
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})

function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}):\n${out}\n${err}")
  endif()
  message(STATUS "${what}: ok")
  set(last_output "${out}" PARENT_SCOPE)
endfunction()

run("cmake --install" ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})
foreach(f include/jitfit.h)
  if(NOT EXISTS ${prefix}/${f})
    message(FATAL_ERROR "not installed: ${f}")
  endif()
endforeach()
file(GLOB pcdir ${prefix}/lib*/pkgconfig ${prefix}/lib/*/pkgconfig)
if(NOT pcdir)
  message(FATAL_ERROR "no pkgconfig directory under ${prefix}")
endif()

# pkg-config: compile and link with the flags the installed jitfit.pc gives.
set(ENV{PKG_CONFIG_PATH} "${pcdir}")
run("pkg-config" pkg-config --cflags --libs jitfit)
string(STRIP "${last_output}" flags)
separate_arguments(flags UNIX_COMMAND "${flags}")
run("cc with pkg-config" cc -std=c11 -Wall -Werror ${SRC_DIR}/examples/embed.c ${flags} -lm
    -o ${WORK_DIR}/embed_pc)
# The shared library is not in the loader's path: the program finds it through LD_LIBRARY_PATH.
get_filename_component(libdir ${pcdir} DIRECTORY)
run("embed (pkg-config)" ${CMAKE_COMMAND} -E env LD_LIBRARY_PATH=${libdir} ${WORK_DIR}/embed_pc)
if(NOT last_output MATCHES "all fits recovered k")
  message(FATAL_ERROR "embed (pkg-config) printed:\n${last_output}")
endif()

# find_package(jitfit): a tiny CMake project.
run("configure examples/embed" ${CMAKE_COMMAND} -S ${SRC_DIR}/examples/embed -B ${WORK_DIR}/cmake
    -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_BUILD_TYPE=Release)
run("build examples/embed" ${CMAKE_COMMAND} --build ${WORK_DIR}/cmake)
run("embed (find_package)" ${CMAKE_COMMAND} -E env LD_LIBRARY_PATH=${libdir} ${WORK_DIR}/cmake/embed)
if(NOT last_output MATCHES "all fits recovered k")
  message(FATAL_ERROR "embed (find_package) printed:\n${last_output}")
endif()
file(REMOVE_RECURSE ${WORK_DIR})
