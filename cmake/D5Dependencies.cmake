# Required libraries (scripts/install-deps.sh installs all of them).
find_package(fmt REQUIRED)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(CLI11 REQUIRED)
find_package(Threads REQUIRED)
find_package(OpenMP REQUIRED COMPONENTS CXX)
# Digests (SHA-256 cache keys, MD5/SHA-256 download checks) come from libcrypto.
find_package(OpenSSL 1.1 COMPONENTS Crypto)
if(NOT OpenSSL_FOUND)
  message(FATAL_ERROR "OpenSSL's libcrypto not found: install libssl-dev (scripts/install-deps.sh)")
endif()
# Host topology and caches (sockets, cores, NUMA nodes, cache levels) come from hwloc, which
# knows every platform's sources (sysfs, CPUID, device tree) better than a hand-written parser.
find_package(PkgConfig REQUIRED)
pkg_check_modules(D5_HWLOC QUIET IMPORTED_TARGET hwloc>=2.0)
if(NOT D5_HWLOC_FOUND)
  message(FATAL_ERROR "hwloc 2 not found: install libhwloc-dev (scripts/install-deps.sh)")
endif()
if(D5_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
if(D5_BUILD_BENCH)
  find_package(benchmark QUIET)
endif()

# Optional backends and engines. Versions found here are the ones compiled against;
# the manifest also records versions reported at run time where a library offers them.
set(D5_LIBRARY_VERSIONS "")
macro(d5_record_library name version)
  list(APPEND D5_LIBRARY_VERSIONS "${name}=${version}")
endmacro()

if(NOT D5_WITH_TORCH STREQUAL "OFF")
  find_package(Torch QUIET)
endif()
d5_resolve_dependency(D5_WITH_TORCH Torch_FOUND "libtorch-dev")

# Located directly: Debian's dnnl-config.cmake insists on OpenCL, which the CPU backend never uses.
set(D5_DNNL_FOUND OFF)
if(NOT D5_WITH_ONEDNN STREQUAL "OFF")
  find_path(D5_DNNL_INCLUDE_DIR oneapi/dnnl/dnnl.hpp)
  find_library(D5_DNNL_LIBRARY NAMES dnnl)
  if(EXISTS "${D5_DNNL_INCLUDE_DIR}/oneapi/dnnl/dnnl_version.h" AND EXISTS "${D5_DNNL_LIBRARY}")
    set(D5_DNNL_FOUND ON)
    file(STRINGS "${D5_DNNL_INCLUDE_DIR}/oneapi/dnnl/dnnl_version.h" _v REGEX "#define DNNL_VERSION_(MAJOR|MINOR|PATCH) ")
    string(REGEX REPLACE ".*MAJOR ([0-9]+).*MINOR ([0-9]+).*PATCH ([0-9]+).*" "\\1.\\2.\\3" dnnl_VERSION "${_v}")
    add_library(D5::dnnl UNKNOWN IMPORTED)
    set_target_properties(D5::dnnl PROPERTIES IMPORTED_LOCATION "${D5_DNNL_LIBRARY}"
                          INTERFACE_INCLUDE_DIRECTORIES "${D5_DNNL_INCLUDE_DIR}")
  endif()
endif()
d5_resolve_dependency(D5_WITH_ONEDNN D5_DNNL_FOUND "libdnnl-dev")

if(NOT D5_WITH_MPI STREQUAL "OFF")
  find_package(MPI QUIET COMPONENTS CXX)
endif()
d5_resolve_dependency(D5_WITH_MPI MPI_CXX_FOUND "libopenmpi-dev openmpi-bin")

# The CUDA backend needs the toolkit's compiler (its kernels are .cu sources), cuBLAS and cuDNN 9.
# NVML is not linked: the backend loads it from the driver at run time (src/backends/cuda/nvml.h).
set(D5_CUDA_FOUND OFF)
if(NOT D5_WITH_CUDA STREQUAL "OFF")
  find_package(CUDAToolkit QUIET)
  if(CUDAToolkit_FOUND)
    if(NOT CMAKE_CUDA_COMPILER AND CUDAToolkit_NVCC_EXECUTABLE)
      set(CMAKE_CUDA_COMPILER "${CUDAToolkit_NVCC_EXECUTABLE}")
    endif()
    include(CheckLanguage)
    check_language(CUDA)
    find_path(D5_CUDNN_INCLUDE_DIR cudnn.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
    find_library(D5_CUDNN_LIBRARY NAMES cudnn HINTS ${CUDAToolkit_LIBRARY_DIR})
    if(CMAKE_CUDA_COMPILER AND D5_CUDNN_INCLUDE_DIR AND D5_CUDNN_LIBRARY AND TARGET CUDA::cublas)
      set(D5_CUDA_FOUND ON)
    endif()
  endif()
endif()
d5_resolve_dependency(D5_WITH_CUDA D5_CUDA_FOUND "a CUDA toolkit 12 or 13 (nvcc, cudart, cuBLAS) and cuDNN 9")
if(D5_HAVE_CUDA)
  # Ampere and Hopper machine code, and Hopper's PTX for later GPUs; set CMAKE_CUDA_ARCHITECTURES
  # to build for others ("native" for the GPU of the build machine).
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES "80-real;90" CACHE STRING "GPU architectures of the CUDA backend")
  endif()
  enable_language(CUDA)
  # The C++ launcher (ccache, from the Makefile) caches nvcc's work too: the kernels take minutes.
  if(CMAKE_CXX_COMPILER_LAUNCHER AND NOT CMAKE_CUDA_COMPILER_LAUNCHER)
    set(CMAKE_CUDA_COMPILER_LAUNCHER "${CMAKE_CXX_COMPILER_LAUNCHER}")
  endif()
  add_library(D5::cudnn UNKNOWN IMPORTED)
  set_target_properties(D5::cudnn PROPERTIES IMPORTED_LOCATION "${D5_CUDNN_LIBRARY}"
                        INTERFACE_INCLUDE_DIRECTORIES "${D5_CUDNN_INCLUDE_DIR}")
  file(STRINGS "${D5_CUDNN_INCLUDE_DIR}/cudnn_version.h" _v REGEX "#define CUDNN_(MAJOR|MINOR|PATCHLEVEL) ")
  string(REGEX REPLACE ".*MAJOR ([0-9]+).*MINOR ([0-9]+).*PATCHLEVEL ([0-9]+).*" "\\1.\\2.\\3" D5_CUDNN_VERSION "${_v}")
endif()

# ONNX and protobuf: model and tensor I/O (d5_onnx), the conformance runner, Level 1.
# Debian's onnx_proto target links protobuf::libprotobuf, so both must be found.
find_package(ONNX QUIET)
find_package(Protobuf QUIET)
# ONNX 1.16 and later (Debian trixie: 1.17) export their targets as ONNX::onnx and
# ONNX::onnx_proto; bookworm's 1.13 as onnx and onnx_proto. The plain names serve both.
foreach(_onnx_target onnx onnx_proto)
  if(NOT TARGET ${_onnx_target} AND TARGET ONNX::${_onnx_target})
    add_library(${_onnx_target} ALIAS ONNX::${_onnx_target})
  endif()
endforeach()
set(D5_ONNX_FOUND OFF)
if(ONNX_FOUND AND Protobuf_FOUND AND TARGET onnx AND TARGET onnx_proto AND TARGET protobuf::libprotobuf)
  set(D5_ONNX_FOUND ON)
endif()
d5_resolve_dependency(D5_WITH_ONNX D5_ONNX_FOUND "libonnx-dev libprotobuf-dev")

# NCCL: Level 3's collectives on GPU memory (src/lv3/nccl/), beside the CUDA backend. A CUDA
# toolkit may bring it; a PyTorch installation's nvidia-nccl wheel has it too, named with
# D5_NCCL_ROOT (that wheel ships libnccl.so.2 without the unversioned link).
set(D5_NCCL_FOUND OFF)
if(D5_HAVE_CUDA AND NOT D5_WITH_NCCL STREQUAL "OFF")
  set(D5_NCCL_ROOT "" CACHE PATH "Where nccl.h (include/) and libnccl (lib/) are, when not in the CUDA toolkit")
  find_path(D5_NCCL_INCLUDE_DIR nccl.h HINTS ${D5_NCCL_ROOT}/include ${CUDAToolkit_INCLUDE_DIRS})
  find_library(D5_NCCL_LIBRARY NAMES nccl libnccl.so.2 HINTS ${D5_NCCL_ROOT}/lib ${CUDAToolkit_LIBRARY_DIR})
  if(D5_NCCL_INCLUDE_DIR AND D5_NCCL_LIBRARY)
    file(STRINGS "${D5_NCCL_INCLUDE_DIR}/nccl.h" _v REGEX "#define NCCL_(MAJOR|MINOR|PATCH) ")
    string(REGEX REPLACE ".*MAJOR ([0-9]+).*MINOR ([0-9]+).*PATCH ([0-9]+).*" "\\1.\\2.\\3" D5_NCCL_VERSION "${_v}")
    add_library(D5::nccl UNKNOWN IMPORTED)
    set_target_properties(D5::nccl PROPERTIES IMPORTED_LOCATION "${D5_NCCL_LIBRARY}"
                          INTERFACE_INCLUDE_DIRECTORIES "${D5_NCCL_INCLUDE_DIR}")
    set(D5_NCCL_FOUND ON)
  endif()
endif()
d5_resolve_dependency(D5_WITH_NCCL D5_NCCL_FOUND "NCCL (nccl.h, libnccl) and the CUDA backend")

set(D5_BACKENDS reference)
if(D5_HAVE_TORCH)
  list(APPEND D5_BACKENDS torch)
  d5_record_library(libtorch "${Torch_VERSION}")
endif()
if(D5_HAVE_ONEDNN)
  list(APPEND D5_BACKENDS onednn)
  d5_record_library(onednn "${dnnl_VERSION}")
endif()
if(D5_HAVE_CUDA)
  list(APPEND D5_BACKENDS cuda)
  d5_record_library(cuda "${CUDAToolkit_VERSION}")
  d5_record_library(cudnn "${D5_CUDNN_VERSION}")
endif()
if(D5_HAVE_NCCL)
  d5_record_library(nccl "${D5_NCCL_VERSION}")
endif()
if(D5_HAVE_MPI)
  d5_record_library(mpi "${MPI_CXX_VERSION}")
endif()
# What this binary links, not what the machine has: a build with D5_WITH_ONNX=OFF has neither.
if(D5_HAVE_ONNX)
  d5_record_library(onnx "${ONNX_VERSION}")
  d5_record_library(protobuf "${Protobuf_VERSION}")
endif()
d5_record_library(fmt "${fmt_VERSION}")
d5_record_library(nlohmann_json "${nlohmann_json_VERSION}")
d5_record_library(cli11 "${CLI11_VERSION}")
d5_record_library(openmp "${OpenMP_CXX_VERSION}")
d5_record_library(openssl "${OPENSSL_VERSION}")
d5_record_library(hwloc "${D5_HWLOC_VERSION}")

# Level 2 data formats. zlib reads gzip'd IDX files and tar.gz archives; TurboJPEG decodes
# indexed-tar and TFRecord JPEGs; libcurl downloads datasets. A missing one removes the formats
# or the downloader that need it (they refuse with the package to install), never the build.
find_package(ZLIB REQUIRED)
set(D5_HAVE_TURBOJPEG OFF)
if(TRUE)
  pkg_check_modules(D5_TURBOJPEG QUIET IMPORTED_TARGET libturbojpeg)
  if(D5_TURBOJPEG_FOUND)
    set(D5_HAVE_TURBOJPEG ON)
    d5_record_library(libturbojpeg "${D5_TURBOJPEG_VERSION}")
  endif()
endif()
# SentencePiece tokenizes the text datasets (wordnet-glosses); without it they refuse with the
# package to install.
# Sanitizer and fuzz builds leave it out: its plugin needs RTLD_DEEPBIND, which ASan refuses.
set(D5_HAVE_SENTENCEPIECE OFF)
pkg_check_modules(D5_SENTENCEPIECE QUIET IMPORTED_TARGET sentencepiece)
if(D5_SENTENCEPIECE_FOUND AND NOT D5_FUZZ AND NOT D5_SANITIZE)
  set(D5_HAVE_SENTENCEPIECE ON)
  d5_record_library(sentencepiece "${D5_SENTENCEPIECE_VERSION}")
endif()
# The speech sets (spoken-words): eSpeak NG's program speaks them (found at run time),
# libsamplerate resamples its output to 16 kHz, libsndfile reads it and caches the clips as WAV,
# FFTW computes the log-mel front end. Each missing one makes the speech sets refuse with the
# packages to install; the build goes on.
foreach(_d5_speech_lib IN ITEMS samplerate sndfile fftw3f)
  string(TOUPPER "D5_${_d5_speech_lib}" _d5_prefix)
  string(REPLACE "-" "_" _d5_prefix "${_d5_prefix}")
  pkg_check_modules(${_d5_prefix} QUIET IMPORTED_TARGET ${_d5_speech_lib})
  if(${_d5_prefix}_FOUND)
    d5_record_library(${_d5_speech_lib} "${${_d5_prefix}_VERSION}")
  endif()
endforeach()
set(D5_HAVE_SPEECH_SYNTHESIS OFF)
if(D5_SAMPLERATE_FOUND AND D5_SNDFILE_FOUND)
  set(D5_HAVE_SPEECH_SYNTHESIS ON)
endif()
set(D5_HAVE_SNDFILE ${D5_SNDFILE_FOUND})
set(D5_HAVE_FFTW ${D5_FFTW3F_FOUND})
find_package(CURL QUIET)
set(D5_HAVE_CURL ${CURL_FOUND})
if(CURL_FOUND)
  d5_record_library(libcurl "${CURL_VERSION_STRING}")
endif()

# SQLite keeps the result history (d5 db). Without it `d5 db` refuses with the package to install;
# everything else builds.
find_package(SQLite3 QUIET)
set(D5_HAVE_SQLITE OFF)
if(SQLite3_FOUND AND TARGET SQLite::SQLite3)
  set(D5_HAVE_SQLITE ON)
  d5_record_library(sqlite "${SQLite3_VERSION}")
else()
  message(STATUS "Result history (d5 db) disabled: SQLite not found (Debian: libsqlite3-dev)")
endif()

# yaml-cpp reads recipes (d5 run). Without it `d5 run` refuses with the package to install;
# everything else builds.
find_package(yaml-cpp QUIET)
set(D5_HAVE_YAML OFF)
if(yaml-cpp_FOUND AND TARGET yaml-cpp)
  set(D5_HAVE_YAML ON)
  d5_record_library(yaml-cpp "${yaml-cpp_VERSION}")
else()
  message(STATUS "Recipes (d5 run) disabled: yaml-cpp not found (Debian: libyaml-cpp-dev)")
endif()
