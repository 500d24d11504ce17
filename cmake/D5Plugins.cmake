# Backend plugins (include/deep500/spi/backend_plugin.h, docs/contributing.md#a-backend).
#
# d5_backend_plugin(NAME LIBRARY): the library defines `const d5::BackendPlugin d5::plugins::NAME`;
# src/backends/ generates the list of every plugin declared this way and links their libraries
# into d5_backends. A backend that is not built never declares one, so nothing else changes.
function(d5_backend_plugin name library)
  set_property(GLOBAL APPEND PROPERTY D5_BACKEND_PLUGINS ${name})
  set_property(GLOBAL APPEND PROPERTY D5_BACKEND_PLUGIN_LIBRARIES ${library})
endfunction()

# d5_add_backend(NAME): builds src/backends/NAME/ when D5_HAVE_<NAME> (found and not switched
# off); the reference backend has no switch.
macro(d5_add_backend name)
  string(TOUPPER "${name}" _d5_upper)
  if("${name}" STREQUAL "reference" OR D5_HAVE_${_d5_upper})
    add_subdirectory(${name})
  endif()
endmacro()
