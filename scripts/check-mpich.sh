#!/usr/bin/env bash
# Builds deep500's MPI parts against MPICH (next to Open MPI, which stays the default) and runs
# the MPI tests under MPICH's Hydra: `ctest -L mpi`. Not part of `make test` (a second build of
# the core, several minutes); run it after changing src/lv3 or the distributed CLI.
#   scripts/check-mpich.sh [BUILD_DIR]     (default build-mpich)
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:-build-mpich}"
if ! command -v mpicxx.mpich >/dev/null; then
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update
  $sudo apt-get install -y --no-install-recommends libmpich-dev mpich
fi
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
# The torch and oneDNN backends do not touch MPI; leaving them out keeps this build short.
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DD5_WITH_TORCH=OFF -DD5_WITH_ONEDNN=OFF \
  -DD5_WITH_MPI=ON -DMPI_C_COMPILER=/usr/bin/mpicc.mpich -DMPI_CXX_COMPILER=/usr/bin/mpicxx.mpich \
  -DMPIEXEC_EXECUTABLE=/usr/bin/mpiexec.mpich "${launcher[@]}"
ninja -C "$build" -j2 d5 d5_test_lv3_mpi d5_test_lv3_oracle_mpi d5_test_cli_dist
ldd "$build/bin/d5" | grep -q libmpich || { echo "check-mpich: d5 is not linked with MPICH" >&2; exit 1; }
cd "$build" && ctest -L mpi --output-on-failure
