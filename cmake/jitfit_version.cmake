# The version's one source is include/jitfit.h's JITFIT_VERSION: the installed header, the
# kernel cache's key and `jitfit version` read it there, and CMake's project() (so the shared
# library's file name and SONAME, jitfit.pc and jitfitConfigVersion.cmake) takes it from there,
# so the two cannot drift. A header without exactly one `#define JITFIT_VERSION "X.Y.Z"` line
# stops the configure with FATAL_ERROR.

# Sets out to the MAJOR.MINOR.PATCH of JITFIT_VERSION in header.
function(jf_read_version header out)
  file(STRINGS "${header}" lines REGEX "^[ \t]*#[ \t]*define[ \t]+JITFIT_VERSION([ \t]|$)")
  list(LENGTH lines n)
  if(NOT n EQUAL 1 OR NOT lines MATCHES
     "^#define JITFIT_VERSION \"(0|[1-9][0-9]*)\\.(0|[1-9][0-9]*)\\.(0|[1-9][0-9]*)\"$")
    message(FATAL_ERROR "${header}: expected one line `#define JITFIT_VERSION \"MAJOR.MINOR.PATCH\"` "
                        "(the version's only source, which project() reads), found ${n}: ${lines}")
  endif()
  set(${out} "${CMAKE_MATCH_1}.${CMAKE_MATCH_2}.${CMAKE_MATCH_3}" PARENT_SCOPE)
endfunction()
