# Build facts compiled into the binary for the manifest. The git revision is re-read at every
# build (not just at configure time) so the manifest never names a stale commit.
string(TOUPPER "${CMAKE_BUILD_TYPE}" _bt)
set(D5_BUILD_FLAGS "${CMAKE_CXX_FLAGS} ${CMAKE_CXX_FLAGS_${_bt}}")
string(STRIP "${D5_BUILD_FLAGS}" D5_BUILD_FLAGS)
string(REPLACE ";" "," D5_LIBRARY_VERSIONS_STR "${D5_LIBRARY_VERSIONS}")
string(REPLACE ";" "," D5_BACKENDS_STR "${D5_BACKENDS}")
# The backends deep500 has (one folder each) that this build was configured without: asking for
# one of them is "not built" (exit 6), asking for any other name is a typo (exit 2).
file(GLOB _backend_files RELATIVE "${CMAKE_SOURCE_DIR}/src/backends" "${CMAKE_SOURCE_DIR}/src/backends/*/CMakeLists.txt")
set(D5_NOT_BUILT_BACKENDS "")
foreach(f IN LISTS _backend_files)
  get_filename_component(_name "${f}" DIRECTORY)
  if(NOT _name IN_LIST D5_BACKENDS)
    list(APPEND D5_NOT_BUILT_BACKENDS "${_name}")
  endif()
endforeach()
list(SORT D5_NOT_BUILT_BACKENDS)
string(REPLACE ";" "," D5_NOT_BUILT_BACKENDS_STR "${D5_NOT_BUILT_BACKENDS}")

set(D5_BUILD_INFO_CPP "${CMAKE_BINARY_DIR}/generated/build_info.cpp")
add_custom_target(d5_build_info_gen ALL
  COMMAND ${CMAKE_COMMAND}
    -DSOURCE_DIR=${CMAKE_SOURCE_DIR}
    -DOUTPUT=${D5_BUILD_INFO_CPP}
    -DVERSION=${PROJECT_VERSION}
    -DCOMPILER=${CMAKE_CXX_COMPILER_ID}\ ${CMAKE_CXX_COMPILER_VERSION}
    -DFLAGS=${D5_BUILD_FLAGS}
    -DBUILD_TYPE=${CMAKE_BUILD_TYPE}
    -DLIBRARIES=${D5_LIBRARY_VERSIONS_STR}
    -DBACKENDS=${D5_BACKENDS_STR}
    -DNOT_BUILT=${D5_NOT_BUILT_BACKENDS_STR}
    -P ${CMAKE_SOURCE_DIR}/cmake/gen_build_info.cmake
  BYPRODUCTS ${D5_BUILD_INFO_CPP}
  COMMENT "Recording build information"
  VERBATIM)
