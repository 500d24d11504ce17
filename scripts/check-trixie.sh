#!/usr/bin/env bash
# Builds deep500 in a Debian trixie root (g++ 14, LibTorch 2.6, ONNX 1.17, CMake 3.31, without
# most optional libraries) and runs its tests there: the torch backend built and run against
# LibTorch 2.x on the CPU, which a PyTorch 2.x installation's LibTorch on a GPU node needs first.
# Not part of `make test` (a second full build, about 30 minutes on 2 cores); run it as root after
# changing the torch backend. scripts/check-libtorch-api.py is the quick compile-only check CI runs.
#   scripts/check-trixie.sh [ROOT] [CTEST_ARGS...]   (default ROOT build-trixie-root; CTEST_ARGS,
#                                                    e.g. -R torch, narrow the tests)
# The root is made once with debootstrap from Debian's archive and reused; the working tree (its
# tracked and untracked files, uncommitted changes included) is copied in at each run.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$(realpath -m "${1:-build-trixie-root}")"
shift || true
ctest_args=("$@")
[ "$(id -u)" -eq 0 ] || { echo "check-trixie: debootstrap and chroot need root" >&2; exit 2; }
mirror="$(sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -1)"
mirror="${mirror:-http://deb.debian.org/debian}"

if [ ! -x "$root/usr/bin/apt-get" ]; then
  command -v debootstrap >/dev/null || apt-get install -y -q --no-install-recommends debootstrap
  debootstrap --variant=minbase trixie "$root" "$mirror"
fi

mounted=()
unmount_all() { for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount -l "${mounted[i]}" || true; done; }
trap unmount_all EXIT
bind() {  # bind SRC DST: mounted for this run only
  mkdir -p "$2"
  mountpoint -q "$2" || { mount --bind "$1" "$2"; mounted+=("$2"); }
}
bind /proc "$root/proc"
bind /dev "$root/dev"
bind /sys "$root/sys"
[ -d ../shared ] && bind "$(realpath ../shared)" "$root/root/shared"
cp /etc/resolv.conf "$root/etc/resolv.conf"

# What the torch backend's build and tests need there; oneDNN, MPI and CUDA stay off, and so do
# the optional libraries (FFTW, SQLite, yaml-cpp, ...), whose absence must never break the build.
# OpenBLAS, as scripts/install-deps.sh installs it: with Debian's default reference BLAS, LibTorch's
# BLAS calls round differently, and the L-BFGS twins differ by 2.5e-5 instead of 1e-6.
packages=(build-essential cmake ninja-build pkg-config git libtorch-dev libonnx-dev python3-onnx
          libprotobuf-dev protobuf-compiler nlohmann-json3-dev libcli11-dev libfmt-dev zlib1g-dev
          libssl-dev libhwloc-dev libgtest-dev libgmock-dev python3 python3-numpy file
          libopenblas0-openmp)
chroot "$root" env DEBIAN_FRONTEND=noninteractive bash -c \
  "apt-get update -q && apt-get install -y -q --no-install-recommends ${packages[*]}"

# The working tree as it is. Only files whose content changed are written, and they get the time
# of the copy: the build there is incremental, and a file edited while an earlier build ran
# there (older than the object that build made of its previous content) is still rebuilt.
mkdir -p "$root/root/d5"
git ls-files -z --cached --others --exclude-standard | while IFS= read -r -d '' f; do
  [ -f "$f" ] || continue
  cmp -s "$f" "$root/root/d5/$f" 2>/dev/null && continue
  mkdir -p "$root/root/d5/$(dirname "$f")"
  cp "$f" "$root/root/d5/$f"
done
# and the repository, whose revision the build's manifest records (d5 info's git_revision).
rm -rf "$root/root/d5/.git" && cp -a "$(git rev-parse --git-dir)" "$root/root/d5/.git"

chroot "$root" bash -c "
  set -euo pipefail
  cd /root/d5
  torch=\$(dpkg-query -W -f='\${Version}' libtorch-dev)
  echo \"check-trixie: \$(g++ --version | head -1), libtorch-dev \$torch\"
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DD5_WERROR=ON -DD5_WITH_TORCH=ON \
    -DD5_WITH_ONNX=ON -DD5_WITH_ONEDNN=OFF -DD5_WITH_MPI=OFF -DD5_WITH_CUDA=OFF >/dev/null
  ninja -C build
  build/bin/d5 info | grep -E '^ *(torch|onnx|libtorch)' || true
  cd build && ctest --output-on-failure -j2 $(printf '%q ' "${ctest_args[@]}")
"
