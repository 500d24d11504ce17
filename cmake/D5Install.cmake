# Installing deep500 (docs/building.md#installing): `cmake --install` puts d5, libdeep500.so (every
# layer and every built backend in one shared library), the public headers, the data d5 reads
# (suites, recipes, the report's Vega bundles) and deep500Config.cmake in place, so that a user's
# project finds it with find_package(deep500) and links deep500::deep500. `cpack -G DEB` packs
# the same tree as a Debian package.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# Every static library of the build, whole: registrations (plugins, zoo models, operators) live in
# objects nothing else references, and a user's program must get them all.
set(_d5_archives d5_core d5_metrics d5_lv0 d5_lv1 d5_zoo d5_lv2 d5_lv3 d5_experiment d5_report d5_history
                  d5_backends)
get_property(_d5_plugin_libraries GLOBAL PROPERTY D5_BACKEND_PLUGIN_LIBRARIES)
list(APPEND _d5_archives ${_d5_plugin_libraries})
if(D5_HAVE_ONNX)
  list(APPEND _d5_archives d5_onnx d5_onnx_conformance)
endif()
list(REMOVE_DUPLICATES _d5_archives)
file(WRITE ${CMAKE_BINARY_DIR}/deep500_library.cpp
     "// libdeep500: the static libraries of the build, linked whole (cmake/D5Install.cmake).\n")
add_library(deep500 SHARED ${CMAKE_BINARY_DIR}/deep500_library.cpp)
add_library(deep500::deep500 ALIAS deep500)
# The archives go to the linker whole by path (a LINK_LIBRARY feature would clash with the same
# archives reached again, without it, through each other's dependencies); linking them normally as
# well brings their own dependencies (LibTorch, oneDNN, MPI, ...) in.
set(_d5_whole "LINKER:--whole-archive")
foreach(_a IN LISTS _d5_archives)
  list(APPEND _d5_whole "$<TARGET_FILE:${_a}>")
endforeach()
list(APPEND _d5_whole "LINKER:--no-whole-archive")
target_link_options(deep500 PRIVATE ${_d5_whole})
add_dependencies(deep500 ${_d5_archives})
target_link_libraries(deep500 PRIVATE ${_d5_archives}
                      INTERFACE fmt::fmt nlohmann_json::nlohmann_json Threads::Threads)
target_include_directories(deep500 INTERFACE $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
                           $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
target_compile_features(deep500 INTERFACE cxx_std_20)
set_target_properties(deep500 PROPERTIES VERSION ${PROJECT_VERSION} SOVERSION ${PROJECT_VERSION_MAJOR}
                      EXPORT_NAME deep500)
# The installed d5 and libdeep500 find their libraries and LibTorch's next to them or where the
# build found them.
set_target_properties(deep500 d5 PROPERTIES INSTALL_RPATH "$ORIGIN/../${CMAKE_INSTALL_LIBDIR};$ORIGIN"
                      INSTALL_RPATH_USE_LINK_PATH ON)

install(TARGETS deep500 EXPORT deep500Targets LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(TARGETS d5 RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
if(TARGET d5_sentencepiece)
  install(TARGETS d5_sentencepiece LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}/deep500)
endif()
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/deep500 DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/suites/ DESTINATION ${CMAKE_INSTALL_DATADIR}/deep500/suites)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/recipes/ DESTINATION ${CMAKE_INSTALL_DATADIR}/deep500/recipes)
# Of the Vega packages only what d5 report reads (src/report/vega_bundles.cpp: each package's
# minified bundle and package.json) and their licences: node_modules holds ~2,900 files (32 MB)
# that a page never uses, and CPack ran `file` on each of them.
foreach(_pkg vega vega-lite vega-embed)
  set(_dir ${PROJECT_SOURCE_DIR}/third_party/vega/node_modules/${_pkg})
  if(EXISTS ${_dir}/build/${_pkg}.min.js)
    install(FILES ${_dir}/build/${_pkg}.min.js DESTINATION ${CMAKE_INSTALL_DATADIR}/deep500/vega/${_pkg}/build)
    install(FILES ${_dir}/package.json ${_dir}/LICENSE DESTINATION ${CMAKE_INSTALL_DATADIR}/deep500/vega/${_pkg})
  endif()
endforeach()
install(EXPORT deep500Targets NAMESPACE deep500:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/deep500)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/deep500Config.cmake.in
                              ${CMAKE_BINARY_DIR}/deep500Config.cmake
                              INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/deep500)
write_basic_package_version_file(${CMAKE_BINARY_DIR}/deep500ConfigVersion.cmake COMPATIBILITY SameMajorVersion)
install(FILES ${CMAKE_BINARY_DIR}/deep500Config.cmake ${CMAKE_BINARY_DIR}/deep500ConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/deep500)

set(CPACK_PACKAGE_NAME deep500)
set(CPACK_PACKAGE_VENDOR "deep500")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${PROJECT_DESCRIPTION}")
set(CPACK_PACKAGE_CONTACT "deep500 <deep500@localhost>")
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "deep500 <deep500@localhost>")
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
# Run-time dependencies from the shared libraries d5 and libdeep500 link (dpkg-shlibdeps), plus
# the headers deep500's public headers include.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "libfmt-dev, nlohmann-json3-dev")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
include(CPack)
