#!/usr/bin/env bash
# scripts/check-libtorch-api.py against a local file:// Debian mirror whose libtorch-dev holds
# made-up headers: the index is read, the package's SHA-256 checked and the package unpacked
# once; a file that does not compile against those headers fails the check (exit 1), a package
# whose checksum differs from the index is refused (exit 2). The real check (Debian trixie's
# LibTorch 2.x) is `make check-libtorch-api`, which CI runs.
#   check_libtorch_api_script.sh SOURCE_DIR BUILD_DIR
set -u
src=$1
build=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# A libtorch-dev whose ATen.h stops any file that includes it, with a version of its own.
pkg="$work/pkg"
mkdir -p "$pkg/DEBIAN" "$pkg/usr/include/ATen" "$pkg/usr/include/torch/csrc/api/include/torch"
printf 'Package: libtorch-dev\nVersion: 9.8.7-1\nArchitecture: amd64\nMaintainer: none <none@example.org>\nDescription: test\n' \
  >"$pkg/DEBIAN/control"
echo '#error "made-up LibTorch"' >"$pkg/usr/include/ATen/ATen.h"
printf '#define TORCH_VERSION_MAJOR 9\n#define TORCH_VERSION_MINOR 8\n#define TORCH_VERSION_PATCH 7\n' \
  >"$pkg/usr/include/torch/csrc/api/include/torch/version.h"
mirror="$work/mirror"
mkdir -p "$mirror/pool/main/p/pytorch" "$mirror/dists/testsuite/main/binary-amd64"
deb="pool/main/p/pytorch/libtorch-dev_9.8.7-1_amd64.deb"
dpkg-deb --build --root-owner-group "$pkg" "$mirror/$deb" >/dev/null || fail "dpkg-deb could not build the package"
index() {  # index SHA256
  printf 'Package: other\nVersion: 1\nFilename: pool/x.deb\nSHA256: 00\n\nPackage: libtorch-dev\nVersion: 9.8.7-1\nFilename: %s\nSHA256: %s\n\n' \
    "$deb" "$1" | xz -c >"$mirror/dists/testsuite/main/binary-amd64/Packages.xz"
}
# A build directory of its own, so that the cache of the real check stays as it is.
mkdir -p "$work/build"
cp "$build/compile_commands.json" "$work/build/"
check() { python3 "$src/scripts/check-libtorch-api.py" "$work/build" --mirror "file://$mirror" --suite testsuite --jobs 2 "$@"; }

index 0000000000000000000000000000000000000000000000000000000000000000
out=$(check --only 'torch/register\.cpp$' 2>&1)
[ $? -eq 2 ] || fail "a package whose SHA-256 differs from the index was not refused: $out"
grep -q "SHA-256 differs" <<<"$out" || fail "the refusal does not name the checksum: $out"
[ ! -d "$work/build/libtorch-api/libtorch-dev_9.8.7-1" ] || fail "the refused package was unpacked"

index "$(sha256sum "$mirror/$deb" | cut -d' ' -f1)"
out=$(check --only 'torch/register\.cpp$' 2>&1)
[ $? -eq 1 ] || fail "a file that cannot compile against the fetched headers passed: $out"
grep -q "1 files against LibTorch 9.8.7 (Debian testsuite libtorch-dev 9.8.7-1)" <<<"$out" || fail "wrong header: $out"
grep -q "FAIL  src/backends/torch/register.cpp" <<<"$out" || fail "the failing file is not named: $out"
grep -q "made-up LibTorch" <<<"$out" || fail "the compiler's error is not shown: $out"
[ -f "$work/build/libtorch-api/libtorch-dev_9.8.7-1/usr/include/ATen/ATen.h" ] || fail "the package was not unpacked"

# The unpacked headers are reused: with the mirror gone, --headers names them directly.
out=$(check --headers "$work/build/libtorch-api/libtorch-dev_9.8.7-1/usr/include" --only 'no-such-file' 2>&1)
[ $? -eq 0 ] || fail "checking no file failed: $out"
grep -q "0 files against LibTorch 9.8.7" <<<"$out" || fail "wrong header: $out"
echo "check-libtorch-api.py: fetch, checksum, failure and exit codes as documented"
