#!/usr/bin/env bash
# Makes a build kit: the headers, CMake and pkg-config files and libraries of deep500's required
# dependencies (fmt, nlohmann-json, CLI11, OpenSSL's libcrypto, hwloc, zlib, GoogleTest and
# pkg-config itself), unpacked from this machine's Debian packages into one folder, so that
# deep500 can be built from source on a host that has a compiler, CMake and Python but no
# package registry and no development packages: a GPU node whose PyTorch installation holds the
# CUDA-enabled LibTorch that the torch backend must be compiled against
# (scripts/build-with-kit.sh there; docs/building.md#building-on-a-gpu-node-against-its-libtorch).
#
# usage: scripts/make-build-kit.sh [--mpi] [--limit-mib N] [--debs DIR] KIT_DIR
#        scripts/make-build-kit.sh [--mpi] --list     (the packages it would take, one per line)
#
# --mpi adds Open MPI (its headers, compiler wrappers, mpirun and the libraries they load), so that
# the host can build and run deep500's distributed levels (mpirun -np 2 on one GPU): the limit is
# then 48 MiB unless given. Open MPI is relocated there through OPAL_PREFIX, which
# scripts/build-with-kit.sh sets.
#
# Packages are fetched with `apt-get download` (Debian's registry), or taken from DIR's
# PACKAGE_*.deb files (apt's cache, a local mirror), and unpacked with `dpkg -x`; nothing is
# installed here. Absolute symbolic links are made relative so the kit works wherever
# it is copied; static archives other than GoogleTest's, documentation and manual pages are left
# out. KIT_DIR/MANIFEST names each package and version, and the Debian release they came from.
# The kit's libraries need a glibc at least as new as this machine's.
set -euo pipefail

limit_mib= debs= mpi=0 list=0
while [[ ${1:-} == --* ]]; do
  case $1 in
    --mpi) mpi=1; shift; continue ;;
    --list) list=1; shift; continue ;;
    --limit-mib) limit_mib=$2 ;;
    --debs) debs=$(realpath "$2") ;;
    *) echo "make-build-kit: unknown option $1" >&2; exit 2 ;;
  esac
  shift 2
done
[[ -n $limit_mib ]] || { ((mpi)) && limit_mib=48 || limit_mib=24; }
if [[ $# -ne $((1 - list)) ]]; then
  sed -n '2,23p' "$0" >&2
  exit 2
fi
kit=$(realpath -m "${1:-.}")
command -v apt-get >/dev/null && command -v dpkg >/dev/null ||
  { echo "make-build-kit: needs Debian's apt-get and dpkg" >&2; exit 2; }

# The development packages, then the run-time libraries they link to that a bare host may lack.
# Each one's exact version is whatever apt would install here, so the kit matches this release.
dev_packages=(libfmt-dev nlohmann-json3-dev libcli11-dev libssl-dev libhwloc-dev zlib1g-dev
              libgtest-dev pkgconf pkgconf-bin)
runtime_of() {  # the packages a development package's libraries need at run time (t64: trixie's names)
  apt-cache depends --no-recommends --no-suggests --no-conflicts --no-breaks --no-replaces \
    --no-enhances "$1" 2>/dev/null | sed -n 's/^ *Depends: *//p' |
    grep -E '^(lib(fmt[0-9]+|ssl[0-9]|hwloc[0-9]+|pkgconf[0-9]+|udev[0-9])(t64)?|zlib1g)$' || true
}
packages=("${dev_packages[@]}")
for p in "${dev_packages[@]}"; do
  apt-cache show "$p" >/dev/null 2>&1 || { echo "make-build-kit: apt knows no package $p (apt-get update?)" >&2; exit 1; }
  while read -r dep; do packages+=("$dep"); done < <(runtime_of "$p")
done
# hwloc's library needs libudev, which minimal container images leave out.
while read -r dep; do packages+=("$dep"); done < <(runtime_of "$(runtime_of libhwloc-dev | head -1)")
# Open MPI: its development package, and every library package it needs at run time, short of
# the base system's and those the kit has already (hwloc); hwloc's plugins would bring X11.
mpi_packages() {
  local skip='^(libc6|libgcc-s1|libstdc\+\+6|libatomic1|libuuid1|zlib1g|libhwloc[0-9]+(t64)?|libhwloc-plugins|libjs-.*|.*-dev)$'
  local -A seen=()
  local queue=(libopenmpi-dev) p dep
  while ((${#queue[@]})); do
    p=${queue[0]}
    queue=("${queue[@]:1}")
    [[ -n ${seen[$p]:-} ]] && continue
    seen[$p]=1
    echo "$p"
    while read -r dep; do queue+=("$dep"); done < <(
      apt-cache depends --no-recommends --no-suggests --no-conflicts --no-breaks --no-replaces --no-enhances "$p" \
        2>/dev/null | sed -n 's/^ *Depends: *//p' | grep -E '^(lib|openmpi)' | grep -vE "$skip" || true)
  done
}
if ((mpi)); then
  apt-cache show libopenmpi-dev >/dev/null 2>&1 || { echo "make-build-kit: apt knows no package libopenmpi-dev" >&2; exit 1; }
  while read -r p; do packages+=("$p"); done < <(mpi_packages)
fi
mapfile -t packages < <(printf '%s\n' "${packages[@]}" | sort -u)
if ((list)); then
  printf '%s\n' "${packages[@]}"
  exit 0
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [[ -n $debs ]]; then
  for p in "${packages[@]}"; do
    found=("$debs/${p}"_*.deb)
    [[ -e ${found[0]} ]] || { echo "make-build-kit: no ${p}_*.deb in $debs" >&2; exit 1; }
    cp "${found[0]}" "$work/"
  done
else
  (cd "$work" && apt-get download -q -o APT::Sandbox::User=root "${packages[@]}" >/dev/null)
fi
root="$work/root"
mkdir -p "$root"
for deb in "$work"/*.deb; do dpkg -x "$deb" "$root"; done

# What a build does not read: documentation, manual pages, Debian's metadata, sources, and static
# archives (deep500 links the shared libraries; GoogleTest ships static ones only).
rm -rf "$root/usr/share/doc" "$root/usr/share/man" "$root/usr/share/lintian" "$root/usr/share/bug" \
       "$root/usr/src"  # GoogleTest's link to its sources, in a package the kit leaves out
find "$root" -name '*.a' ! -name 'libgtest*.a' -delete
# Open MPI's Fortran and Java bindings: deep500 uses its C interface.
rm -rf "$root"/usr/lib/*/fortran "$root"/usr/share/java
find "$root" -name 'libmpi_java*' -delete
# Absolute links (zlib's libz.so -> /lib/...) would point at the host's files; make each relative.
while IFS= read -r link; do
  target=$(readlink "$link")
  [[ $target == /* ]] || continue
  rel=$(realpath -m --relative-to="$(dirname "$link")" "$root$target")
  ln -sfn "$rel" "$link"
done < <(find "$root" -type l)

# pkg-config, confined to the kit: its own library, the kit's .pc files, paths under the kit.
arch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch)
mkdir -p "$root/bin"
cat > "$root/bin/pkg-config" <<EOF
#!/bin/sh
# pkgconf from the kit, reading only the kit's .pc files and prefixing their paths with the kit.
kit=\$(cd "\$(dirname "\$0")/.." && pwd)
export PKG_CONFIG_LIBDIR="\$kit/usr/lib/$arch/pkgconfig:\$kit/usr/share/pkgconfig"
export PKG_CONFIG_SYSROOT_DIR="\$kit"
LD_LIBRARY_PATH="\$kit/usr/lib/$arch:\$kit/lib/$arch\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}" exec "\$kit/usr/bin/pkgconf" "\$@"
EOF
chmod +x "$root/bin/pkg-config"

{
  echo "# deep500 build kit: scripts/make-build-kit.sh on $(. /etc/os-release && echo "$PRETTY_NAME"), $(date -u +%Y-%m-%d)"
  echo "arch $arch"
  echo "glibc $(ldd --version | head -1 | awk '{print $NF}') or newer is needed by its libraries"
  for deb in "$work"/*.deb; do dpkg-deb --showformat='${Package} ${Version}\n' -W "$deb"; done
} > "$root/MANIFEST"

kib=$(du -sk "$root" | cut -f1)
if ((kib > limit_mib * 1024)); then
  echo "make-build-kit: the kit would take $((kib / 1024)) MiB, over the limit of $limit_mib MiB; largest:" >&2
  (cd "$root" && find . -type f -printf '%s %p\n' | sort -rn | head -5) >&2 || true  # head closes the pipe
  exit 1
fi
rm -rf "$kit"
mkdir -p "$(dirname "$kit")"
mv "$root" "$kit"
echo "make-build-kit: $kit ($((kib / 1024)) MiB, ${#packages[@]} packages; MANIFEST)"
