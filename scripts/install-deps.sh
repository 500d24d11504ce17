#!/usr/bin/env bash
# Installs every Debian package deep500 needs to build, test and run.
# Idempotent: when everything is already present it only queries dpkg (well under a second).
set -euo pipefail

PACKAGES=(
  # toolchain
  build-essential cmake ninja-build ccache pkg-config git
  # frameworks (backends)
  libtorch-dev libdnnl-dev libomp-dev
  # Debian's LibTorch calls the generic libblas.so.3; without an optimized BLAS that is netlib's
  # reference BLAS (measured: a 1760x16x1760 GEMM 13x slower). The OpenMP build shares libgomp's
  # thread pool with LibTorch and oneDNN instead of adding its own threads.
  libopenblas0-openmp
  # ONNX + protobuf
  libonnx-dev libprotobuf-dev protobuf-compiler
  # distributed
  libopenmpi-dev openmpi-bin
  # utility libraries
  nlohmann-json3-dev libcli11-dev libfmt-dev libyaml-cpp-dev libsqlite3-dev
  zlib1g-dev libturbojpeg0-dev libcurl4-openssl-dev libssl-dev
  # text datasets: SentencePiece tokenizes them, WordNet's glosses are one (wordnet-glosses)
  libsentencepiece-dev wordnet-base
  # speech datasets: eSpeak NG speaks them, libsamplerate resamples, libsndfile reads and writes
  # WAV, FFTW computes the log-mel front end; torchaudio is the front end's test oracle
  espeak-ng libsamplerate0-dev libsndfile1-dev libfftw3-dev python3-torchaudio
  # host topology and caches (the HPC standard that Open MPI itself uses)
  libhwloc-dev
  # testing and benchmarking
  libgtest-dev libgmock-dev libbenchmark-dev
  # `cpack -G DEB` (dpkg-shlibdeps finds the package's dependencies)
  dpkg-dev
  # test-data generation only (ONNX conformance cases, exported networks)
  python3 python3-numpy python3-onnx python3-torch python3-torchvision
  # the Python package (python/, docs/python.md): built for Debian's interpreter, tested with pytest
  pybind11-dev python3-dev python3-pytest
  # `pip install ./python --no-build-isolation` into a venv, offline (its test)
  python3-venv python3-pip python3-setuptools python3-wheel
  # the test that renders `d5 report`'s page headless
  chromium
  # `make fuzz` (docs/fuzzing.md): clang, and its libclang-rt-N-dev (below) for libFuzzer and the
  # sanitizer runtimes (libclang_rt.fuzzer-x86_64.a, libclang_rt.asan-x86_64.a)
  clang
)

# The runtimes of the clang that Debian's `clang` package installs (bookworm: 14, trixie: 19): the
# installed clang's dependency, else apt's, else the release's.
clang_major() {
  local from
  from=$(dpkg-query -W -f='${Depends}' clang 2>/dev/null || apt-cache depends clang 2>/dev/null || true)
  from=$(grep -oE '(^|[ ,])clang-[0-9]+' <<<"$from" | head -1 | grep -oE '[0-9]+' || true)
  if [ -z "$from" ]; then
    case "$(. /etc/os-release 2>/dev/null && echo "${VERSION_CODENAME:-}")" in
      trixie) from=19 ;;
      *) from=14 ;;
    esac
  fi
  echo "$from"
}
PACKAGES+=("libclang-rt-$(clang_major)-dev")

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null | grep -qx installed; then
    missing+=("$p")
  fi
done

# The report's plotting bundles come from the npm registry (scripts/install-vega.sh), after the
# Debian packages (it may need Debian's npm).
install_vega() { bash "$(dirname "$0")/install-vega.sh"; }

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  install_vega
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
    echo "install-deps: missing packages (${missing[*]}) and not root; run as root or install sudo" >&2
    exit 1
  fi
fi

echo "install-deps: installing ${#missing[@]} package(s): ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
echo "install-deps: done"
install_vega
