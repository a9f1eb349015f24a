# The `install` test: installs the current build tree into a fresh prefix, checks that the
# installed header compiles on its own (C99 and C++11, pedantic) and that no installed text file
# names the build or source tree, then builds examples/embed.c against the installed library
# with pkg-config (shared and --static) and with CMake's find_package(jitfit) (jitfit::jitfit,
# and jitfit::jitfit_static in a project that has its own LAPACKE package) and runs each
# program. Arguments: -DBUILD_DIR -DSRC_DIR -DWORK_DIR.
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

# The package files find everything from their own place: a relocated prefix works.
file(GLOB_RECURSE pkgfiles ${prefix}/lib*/*.pc ${prefix}/lib*/*.cmake)
if(NOT pkgfiles)
  message(FATAL_ERROR "no package files under ${prefix}")
endif()
foreach(f ${pkgfiles})
  file(READ ${f} text)
  foreach(tree ${BUILD_DIR} ${SRC_DIR})
    string(FIND "${text}" "${tree}" at)
    if(NOT at EQUAL -1)
      message(FATAL_ERROR "${f} names the tree ${tree}:\n${text}")
    endif()
  endforeach()
endforeach()

# The header on its own: strict C99, and C++ (extern "C", no C-only constructs).
file(WRITE ${WORK_DIR}/header.c "#include <jitfit.h>\nint main(void) { return JF_OK; }\n")
run("header as C99" cc -std=c99 -Wall -Wextra -pedantic -Werror -I${prefix}/include
    -fsyntax-only ${WORK_DIR}/header.c)
find_program(cxx NAMES c++ g++ clang++)
if(cxx)
  file(WRITE ${WORK_DIR}/header.cpp "#include <jitfit.h>\nint main() { return JF_OK; }\n")
  run("header as C++11" ${cxx} -std=c++11 -Wall -Wextra -pedantic -Werror -I${prefix}/include
      -fsyntax-only ${WORK_DIR}/header.cpp)
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

# pkg-config --static: the archive with Libs.private and Requires.private, and no libjitfit.so
# at run time.
run("pkg-config --static" pkg-config --static --cflags --libs jitfit)
string(STRIP "${last_output}" flags)
separate_arguments(flags UNIX_COMMAND "${flags}")
list(TRANSFORM flags REPLACE "^-ljitfit$" "${libdir}/libjitfit.a")
run("cc with pkg-config --static" cc -std=c11 -Wall -Werror ${SRC_DIR}/examples/embed.c ${flags}
    -lm -o ${WORK_DIR}/embed_pc_static)
run("embed (pkg-config --static)" ${WORK_DIR}/embed_pc_static)
if(NOT last_output MATCHES "all fits recovered k")
  message(FATAL_ERROR "embed (pkg-config --static) printed:\n${last_output}")
endif()

# find_package(jitfit): a tiny CMake project.
run("configure examples/embed" ${CMAKE_COMMAND} -S ${SRC_DIR}/examples/embed -B ${WORK_DIR}/cmake
    -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_BUILD_TYPE=Release)
run("build examples/embed" ${CMAKE_COMMAND} --build ${WORK_DIR}/cmake)
run("embed (find_package)" ${CMAKE_COMMAND} -E env LD_LIBRARY_PATH=${libdir} ${WORK_DIR}/cmake/embed)
if(NOT last_output MATCHES "all fits recovered k")
  message(FATAL_ERROR "embed (find_package) printed:\n${last_output}")
endif()

# jitfit::jitfit_static, in a project that uses the name LAPACKE for its own package: the
# static target's dependencies must not be taken for it.
file(WRITE ${WORK_DIR}/static/CMakeLists.txt "cmake_minimum_required(VERSION 3.20)
project(embed_static LANGUAGES C)
find_package(PkgConfig REQUIRED)
pkg_check_modules(LAPACKE REQUIRED IMPORTED_TARGET lapacke)
find_package(jitfit REQUIRED)
add_executable(embed ${SRC_DIR}/examples/embed.c)
target_link_libraries(embed PRIVATE jitfit::jitfit_static m)
")
run("configure jitfit::jitfit_static" ${CMAKE_COMMAND} -S ${WORK_DIR}/static -B ${WORK_DIR}/static/b
    -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_BUILD_TYPE=Release)
run("build jitfit::jitfit_static" ${CMAKE_COMMAND} --build ${WORK_DIR}/static/b)
run("embed (jitfit::jitfit_static)" ${WORK_DIR}/static/b/embed)
if(NOT last_output MATCHES "all fits recovered k")
  message(FATAL_ERROR "embed (jitfit::jitfit_static) printed:\n${last_output}")
endif()
file(REMOVE_RECURSE ${WORK_DIR})
