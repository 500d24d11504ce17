#!/usr/bin/env bash
# Builds deep500 from source on a host without development packages, from a build kit made
# elsewhere by scripts/make-build-kit.sh, against the host's own LibTorch (a PyTorch
# installation's, CUDA-enabled where it is) and CUDA toolkit: the way to run the torch backend
# with --device cuda on a GPU node (docs/building.md#building-on-a-gpu-node-against-its-libtorch).
#
# usage: scripts/build-with-kit.sh [--configure-only] KIT_DIR BUILD_DIR [TARGET...] [-- CMAKE_ARG...]
#   TARGET     what to build (default: d5); --configure-only stops before building
#   CMAKE_ARG  extra configure arguments, after the script's own (so they override them)
# environment:
#   D5_TORCH_PREFIX  the LibTorch to build against: a folder holding share/cmake/Torch or
#                    lib/<arch>/cmake/Torch (default: python3's torch.utils.cmake_prefix_path)
#   D5_CUDNN_ROOT    a cuDNN 9 with include/cudnn.h and lib/libcudnn.so* (default: the one beside
#                    that PyTorch, so that both load the same library; else the CUDA toolkit's)
#
# Writes BUILD_DIR/kit-env.sh, which puts the PyTorch wheel's CUDA libraries, the kit's that the
# host lacks (BUILD_DIR/kit-lib), LibTorch's and cuDNN's on the library path, and with a kit made
# with --mpi, the kit's Open MPI (mpirun on the PATH): source it before running what was built.
# Refuses, with the reason, a LibTorch built with the pre-C++11 string ABI (PyTorch wheels before
# 2.7), which cannot be linked with the kit's C++ libraries.
set -euo pipefail
cd "$(dirname "$0")/.."

configure_only=0
if [[ ${1:-} == --configure-only ]]; then
  configure_only=1
  shift
fi
if [[ $# -lt 2 ]]; then
  sed -n '2,20p' "$0" >&2
  exit 2
fi
kit=$(realpath "$1")
build=$(realpath -m "$2")
shift 2
targets=() cmake_extra=()
while [[ $# -gt 0 && $1 != -- ]]; do targets+=("$1"); shift; done
[[ ${1:-} == -- ]] && { shift; cmake_extra=("$@"); }
((${#targets[@]})) || targets=(d5)

fail() { echo "build-with-kit: $*" >&2; exit 1; }
[[ -f $kit/MANIFEST && -x $kit/bin/pkg-config ]] || fail "$kit is not a build kit (scripts/make-build-kit.sh makes one)"
command -v cmake >/dev/null || fail "needs cmake 3.25 or newer on the PATH"
command -v c++ >/dev/null || command -v g++ >/dev/null || fail "needs a C++20 compiler (g++ 12 or newer)"
python=$(command -v python3) || fail "needs python3 (CMake's build steps run it)"
arch=$(sed -n 's/^arch //p' "$kit/MANIFEST")

echo "build-with-kit: host $(. /etc/os-release 2>/dev/null && echo "${PRETTY_NAME:-unknown}"), $(ldd --version 2>/dev/null | head -1 | awk '{print "glibc " $NF}')"
echo "build-with-kit: kit $(sed -n 1p "$kit/MANIFEST" | sed 's/^# //'); $(sed -n 3p "$kit/MANIFEST")"
echo "build-with-kit: $(cmake --version | head -1), $(${CXX:-c++} --version | head -1)"

# LibTorch: whichever the caller names, else the PyTorch that python3 imports.
torch_prefix=${D5_TORCH_PREFIX:-}
if [[ -z $torch_prefix ]]; then
  torch_prefix=$("$python" -c 'import torch; print(torch.utils.cmake_prefix_path)' 2>/dev/null) ||
    fail "python3 cannot import torch: set D5_TORCH_PREFIX to a LibTorch, or pass -- -DD5_WITH_TORCH=OFF"
  echo "build-with-kit: PyTorch $("$python" -c 'import torch; print(torch.__version__, "CUDA", torch.version.cuda, "cuDNN", torch.backends.cudnn.version())')"
fi
torch_config=$(find -L "$torch_prefix" -maxdepth 5 -name TorchConfig.cmake -print -quit 2>/dev/null || true)
[[ -n $torch_config ]] || fail "no TorchConfig.cmake under $torch_prefix"
if grep -rqs -- '_GLIBCXX_USE_CXX11_ABI=0' "$(dirname "$torch_config")"; then
  fail "the LibTorch at $torch_prefix uses the pre-C++11 string ABI (_GLIBCXX_USE_CXX11_ABI=0, PyTorch wheels before 2.7), but the kit's libraries (fmt, GoogleTest) use the C++11 ABI: use a PyTorch of 2.7 or newer, or LibTorch's cxx11-abi download"
fi
# A wheel keeps its libraries in torch/lib beside share/cmake, Debian in lib/<arch> above cmake/.
torch_libs=
for dir in "$(dirname "$torch_config")/../../../lib" "$(dirname "$torch_config")/../.."; do
  [[ -e $dir/libtorch.so ]] && { torch_libs=$(realpath "$dir"); break; }
done
[[ -n $torch_libs ]] || torch_libs=$(find -L "$torch_prefix" -maxdepth 3 -name libtorch.so -printf '%h\n' -quit)
[[ -n $torch_libs ]] || fail "no libtorch.so near $torch_config"

# CUDA: the toolkit's compiler; cuDNN from D5_CUDNN_ROOT, else the PyTorch's, else the toolkit's.
cuda_args=(-DD5_WITH_CUDA=OFF)
cudnn_libs=
nvcc=$(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null || true)
if [[ -n $nvcc ]]; then
  cudnn_root=${D5_CUDNN_ROOT:-}
  if [[ -z $cudnn_root ]]; then
    cudnn_root=$("$python" -c 'import importlib.util as u; s = u.find_spec("nvidia.cudnn"); print(list(s.submodule_search_locations)[0])' 2>/dev/null || true)
  fi
  # LibTorch's CMake finds the toolkit on its own too: the same one.
  cuda_root=$(dirname "$(dirname "$(realpath "$nvcc")")")
  export PATH="$(dirname "$nvcc"):$PATH" CUDAToolkit_ROOT="$cuda_root"
  cuda_args=(-DD5_WITH_CUDA=ON "-DCMAKE_CUDA_COMPILER=$nvcc" "-DCUDAToolkit_ROOT=$cuda_root")
  if [[ -n $cudnn_root ]]; then
    header=$(find -L "$cudnn_root" -maxdepth 3 -name cudnn_version.h -print -quit)
    library=$(find -L "$cudnn_root" -maxdepth 3 -name 'libcudnn.so*' ! -name '*_*' -print -quit)
    [[ -n $header && -n $library ]] || fail "no cuDNN 9 (include/cudnn_version.h, lib/libcudnn.so*) under $cudnn_root"
    cudnn_libs=$(dirname "$library")
    cuda_args+=("-DD5_CUDNN_INCLUDE_DIR=$(dirname "$header")" "-DD5_CUDNN_LIBRARY=$library")
    # LibTorch's own CMake looks for cuDNN too, through these.
    export CUDNN_INCLUDE_DIR=$(dirname "$header") CUDNN_LIBRARY=$library
    echo "build-with-kit: cuDNN $library"
  fi
  # NCCL from D5_NCCL_ROOT, else the PyTorch's nvidia-nccl wheel, else the toolkit's (if any).
  nccl_root=${D5_NCCL_ROOT:-}
  if [[ -z $nccl_root ]]; then
    nccl_root=$("$python" -c 'import importlib.util as u; s = u.find_spec("nvidia.nccl"); print(list(s.submodule_search_locations)[0])' 2>/dev/null || true)
  fi
  if [[ -n $nccl_root && -f $nccl_root/include/nccl.h ]]; then
    cuda_args+=("-DD5_NCCL_ROOT=$nccl_root")
    echo "build-with-kit: NCCL $nccl_root"
  fi
  # Only the GPUs present, when there are any: a fraction of the kernels' compile time.
  if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
    cuda_args+=(-DCMAKE_CUDA_ARCHITECTURES=native)
  fi
  echo "build-with-kit: $("$nvcc" --version | tail -1)"
fi

# MPI from a kit made with --mpi: Open MPI relocated to the kit (OPAL_PREFIX), its wrappers named
# to CMake; one node's ranks talk through shared memory, so no network transport is tried, and
# mpirun starts its local ranks without ssh. Without it, this build has no Level 3 over MPI.
mpi_args=(-DD5_WITH_MPI=OFF)
mpi_env=
if [[ -x $kit/usr/bin/mpicxx.openmpi ]]; then
  # Each tool loads Open MPI's libraries from the kit, after whatever the caller's path holds (the
  # kit's are not on the library path elsewhere: see kit-lib below); the ranks inherit it.
  mkdir -p "$build/kit-bin"
  for tool in mpicc mpicxx mpirun mpiexec; do
    printf '#!/bin/sh\nLD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}%s" exec "%s" "$@"\n' \
      "$kit/usr/lib/$arch" "$kit/usr/bin/$tool.openmpi" > "$build/kit-bin/$tool"
    chmod +x "$build/kit-bin/$tool"
  done
  mpi_env="export OPAL_PREFIX=\"$kit/usr\" PATH=\"$build/kit-bin:\$PATH\"
export OMPI_MCA_plm_rsh_agent=/bin/false OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader OMPI_MCA_osc=sm,pt2pt"
  eval "$mpi_env"
  mpi_args=(-DD5_WITH_MPI=ON "-DMPI_C_COMPILER=$build/kit-bin/mpicc" "-DMPI_CXX_COMPILER=$build/kit-bin/mpicxx"
            "-DMPIEXEC_EXECUTABLE=$build/kit-bin/mpirun")
  echo "build-with-kit: Open MPI $(sed -n 's/^libopenmpi-dev //p' "$kit/MANIFEST") from the kit"
fi

generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
# The kit's headers come first for what the kit holds; OpenSSL keeps its configuration headers
# in the multiarch folder, which the compiler searches only under /usr. CMake 4 (pip's) refuses
# package files that ask for policies older than 3.5 unless given a minimum.
cmake -S . -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
  "-DCMAKE_PREFIX_PATH=$kit/usr;$torch_prefix" "-DPKG_CONFIG_EXECUTABLE=$kit/bin/pkg-config" \
  "-DCMAKE_CXX_FLAGS=-isystem $kit/usr/include/$arch" "-DPython3_EXECUTABLE=$python" \
  -DCMAKE_POLICY_VERSION_MINIMUM=3.5 \
  -DD5_WITH_TORCH=ON "${cuda_args[@]}" \
  "${mpi_args[@]}" -DD5_WITH_ONEDNN=OFF -DD5_WITH_ONNX=OFF -DD5_WITH_PYTHON=OFF \
  "${cmake_extra[@]}"

# A PyTorch wheel's CUDA libraries (cuBLAS, cuDNN, ...) first: a library d5 and LibTorch both
# need is loaded once, by name, and LibTorch may need a newer one than the toolkit's.
wheel_libs=$("$python" - 2>/dev/null <<'PY' || true
import importlib.util, os
spec = importlib.util.find_spec("nvidia")
found = set()
for top in (spec.submodule_search_locations if spec else []):
    for folder, _, files in os.walk(top):
        if os.path.basename(folder) == "lib" and any(".so" in f for f in files):
            found.add(folder)
print(":".join(sorted(found)))
PY
)
# The kit's run-time libraries that the host lacks, and only those: on the library path they would
# take the place of the host's own (a newer libssl, say) in every program started from there.
# What d5 links itself it finds through its run path; the kit's libudev, which hwloc loads, only so.
mkdir -p "$build/kit-lib"
find "$build/kit-lib" -type l -delete
host_libs=$(ldconfig -p 2>/dev/null || /sbin/ldconfig -p 2>/dev/null || true)
for lib in "$kit/usr/lib/$arch"/*.so.* "$kit/lib/$arch"/*.so.*; do
  [[ -e $lib ]] || continue
  soname=$(basename "$lib")
  [[ $soname =~ ^lib[^.]+\.so\.[0-9]+$ ]] || continue  # the soname link, not the versioned file
  grep -qE "^[[:space:]]+${soname//./\\.} " <<<"$host_libs" || ln -sfn "$lib" "$build/kit-lib/$soname"
done
libs="${wheel_libs:+$wheel_libs:}$build/kit-lib:$torch_libs${cudnn_libs:+:$cudnn_libs}"
cat > "$build/kit-env.sh" <<ENV
# The libraries a build from scripts/build-with-kit.sh loads: source this before running it.
export LD_LIBRARY_PATH="$libs\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
$mpi_env
ENV
((configure_only)) && exit 0
cmake --build "$build" --parallel "$(nproc)" --target "${targets[@]}"
echo "build-with-kit: built ${targets[*]} in $build; source $build/kit-env.sh before running them"
