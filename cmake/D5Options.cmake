# Project options. Every option is prefixed D5_.
# Backend switches are tri-state: AUTO uses what is installed, ON requires it, OFF skips it.

function(d5_tristate_option name doc)
  set(${name} AUTO CACHE STRING "${doc} (AUTO|ON|OFF)")
  set_property(CACHE ${name} PROPERTY STRINGS AUTO ON OFF)
  string(TOUPPER "${${name}}" value)
  if(NOT value MATCHES "^(AUTO|ON|OFF)$")
    message(FATAL_ERROR "${name}='${${name}}' is not valid: use AUTO, ON or OFF")
  endif()
  set(${name} "${value}" PARENT_SCOPE)
endfunction()

d5_tristate_option(D5_WITH_TORCH  "Build the LibTorch backend (Debian: libtorch-dev)")
d5_tristate_option(D5_WITH_ONEDNN "Build the oneDNN backend (Debian: libdnnl-dev)")
d5_tristate_option(D5_WITH_MPI    "Build MPI-based distributed training (Debian: libopenmpi-dev)")
d5_tristate_option(D5_WITH_CUDA   "Build the CUDA backend (needs a CUDA toolkit)")
d5_tristate_option(D5_WITH_NCCL   "Build NCCL collectives on GPU memory (needs the CUDA backend; D5_NCCL_ROOT: where nccl.h and libnccl are)")
d5_tristate_option(D5_WITH_ONNX   "Build ONNX model I/O and the ONNX conformance runner (Debian: libonnx-dev)")
d5_tristate_option(D5_WITH_PYTHON "Build the Python package deep500 (Debian: pybind11-dev python3-dev)")
# The interpreter the package is built for and tested with: Debian's, whose NumPy, PyTorch and
# pytest come from Debian packages, not whichever python3 comes first on the PATH.
set(D5_PYTHON "/usr/bin/python3" CACHE FILEPATH "Python interpreter of the deep500 package")

option(D5_WERROR      "Treat compiler warnings as errors" OFF)
option(D5_BUILD_TESTS "Build the test suites" ON)
option(D5_BUILD_BENCH "Build the performance benchmarks in bench/" ON)

# d5_resolve_dependency(<option> <found-var> <package hint>)
# Sets D5_HAVE_<X> in the caller. ON + not found stops configuration with the package to install.
function(d5_resolve_dependency option found hint)
  string(REPLACE "D5_WITH_" "D5_HAVE_" have "${option}")
  if(${option} STREQUAL "OFF")
    set(${have} OFF PARENT_SCOPE)
  elseif(${found})
    set(${have} ON PARENT_SCOPE)
  elseif(${option} STREQUAL "ON")
    message(FATAL_ERROR "${option}=ON but it was not found: install ${hint} (or set ${option}=AUTO)")
  else()
    message(STATUS "${option}=AUTO: not found (${hint}); skipping")
    set(${have} OFF PARENT_SCOPE)
  endif()
endfunction()

# libFuzzer harnesses for every parser of outside input (fuzz/, docs/fuzzing.md). Needs clang:
# the whole build then carries sanitizer coverage, so use a build directory of its own
# (`make fuzz` uses build-fuzz).
option(D5_FUZZ "Build the libFuzzer harnesses in fuzz/ (clang only)" OFF)
