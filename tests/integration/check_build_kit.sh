#!/usr/bin/env bash
# scripts/make-build-kit.sh and scripts/build-with-kit.sh: the kit holds the required libraries'
# development files with every link inside it, its pkg-config reads only the kit, and a
# configure with it takes each required library from the kit even where the machine has its
# own; a kit over its limit, a folder that is not a kit and a LibTorch of the old string ABI are
# refused with the reason. Nothing is downloaded: the packages are this machine's installed ones,
# packed again into .deb files for --debs.
# With "mpi", a kit made with --mpi holds Open MPI, a configure takes MPI from it, and a program
# built with its wrapper runs on 2 ranks under its mpirun.
#   check_build_kit.sh SOURCE_DIR TORCH_DIR [mpi|no-mpi] (TORCH_DIR: the folder of the LibTorch's
#   TorchConfig.cmake; mpi when this build has MPI, so that Open MPI's packages are installed)
set -u
SRC=$1 TORCH_DIR=$2 MPI=${3:-no-mpi}
source "$(dirname "$0")/script_checks.sh"
kit=$TMP/kit

# An installed package's files as a .deb, as apt-get download would give it.
repack() {
  local p=$1 root=$TMP/repack/$1
  mkdir -p "$root/DEBIAN"
  # Each file at its listed path: folders made as folders, also where the host's /lib is a link.
  dpkg-query -L "$p" | while IFS= read -r f; do
    if [[ -f $f || (-L $f && ! -d $f) ]]; then mkdir -p "$root$(dirname "$f")" && cp -a "$f" "$root$f"; fi
  done
  dpkg-query -W -f='Package: ${Package}\nVersion: ${Version}\nArchitecture: ${Architecture}\n' "$p" > "$root/DEBIAN/control"
  printf 'Maintainer: none\nDescription: %s as installed\n' "$p" >> "$root/DEBIAN/control"
  dpkg-deb -b --root-owner-group "$root" "$TMP/debs/${p}_repacked.deb" > /dev/null
}
mkdir -p "$TMP/debs"
installed() { [[ $(dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null) == installed ]]; }
dev=(libfmt-dev nlohmann-json3-dev libcli11-dev libssl-dev libhwloc-dev zlib1g-dev libgtest-dev pkgconf pkgconf-bin)
for p in "${dev[@]}" libudev1 $(dpkg-query -W -f='${Depends}, ' "${dev[@]}" libhwloc-dev 2>/dev/null |
                                tr ',' '\n' | awk '{print $1}' | sort -u |
                                grep -E '^(lib(fmt[0-9]+|ssl[0-9]|hwloc[0-9]+|pkgconf[0-9]+)(t64)?|zlib1g)$'); do
  if installed "$p" && [[ ! -e $TMP/debs/${p}_repacked.deb ]]; then repack "$p"; fi
done
if [[ $MPI == mpi ]]; then
  for p in $("$SRC/scripts/make-build-kit.sh" --mpi --list); do
    if installed "$p" && [[ ! -e $TMP/debs/${p}_repacked.deb ]]; then repack "$p"; fi
  done
fi

out=$("$SRC/scripts/make-build-kit.sh" --debs "$TMP/debs" "$kit" 2>&1); rc=$?
echo "$out"
check "makes a kit" "[ $rc -eq 0 ]"
for p in libfmt-dev nlohmann-json3-dev libcli11-dev libssl-dev libhwloc-dev zlib1g-dev libgtest-dev pkgconf; do
  check "MANIFEST names $p" "grep -q '^$p ' '$kit/MANIFEST'"
done
check "no absolute link" "[ -z \"\$(find '$kit' -type l -lname '/*')\" ]"
find -L "$kit" -type l > "$TMP/dangling"
check "no dangling link $(cat "$TMP/dangling")" "[ ! -s '$TMP/dangling' ]"
check "every link stays in the kit" \
  "! find '$kit' -type l -exec realpath {} + | grep -v '^$(realpath "$kit")/'"
check "no static archive but GoogleTest's" "[ -z \"\$(find '$kit' -name '*.a' ! -name 'libgtest*')\" ]"
check "no documentation" "[ ! -e '$kit/usr/share/doc' ]"
"$kit/bin/pkg-config" --cflags --libs hwloc > "$TMP/pc" 2>&1
check "pkg-config reads the kit's hwloc.pc ($(cat "$TMP/pc"))" \
  "grep -q -- '-I$kit/usr/include' '$TMP/pc' && grep -q -- '-L$kit/usr/lib/' '$TMP/pc'"
check "pkg-config knows nothing outside the kit" "! env PKG_CONFIG_PATH=/usr/lib/pkgconfig '$kit/bin/pkg-config' --exists python3"

# With MPI, the configure below is made with a kit that also holds Open MPI (--mpi).
cfg=$kit
if [[ $MPI == mpi ]]; then
  cfg=$TMP/mpikit
  out=$("$SRC/scripts/make-build-kit.sh" --mpi --debs "$TMP/debs" "$cfg" 2>&1); rc=$?
  echo "$out"
  check "makes a kit with Open MPI" "[ $rc -eq 0 ]"
  for p in libopenmpi-dev openmpi-bin openmpi-common; do
    check "MANIFEST names $p" "grep -q '^$p ' '$cfg/MANIFEST'"
  done
  check "no Fortran modules" "! ls -d '$cfg'/usr/lib/*/fortran 2>/dev/null"
  check "no dangling link" "[ -z \"\$(find -L '$cfg' -type l -print -quit)\" ]"
else
  echo "skipped: the kit's Open MPI (this build has no MPI, so its packages are not installed)"
fi

# Configured with the kit on a machine that has these packages too: the kit's are the ones found.
# A library the host lacks (a stand-in) goes on the library path; those it has do not.
touch "$cfg/usr/lib/$(sed -n 's/^arch //p' "$cfg/MANIFEST")/libd5kitonly.so.1"
out=$(cd "$SRC" && D5_TORCH_PREFIX=$TORCH_DIR scripts/build-with-kit.sh --configure-only "$cfg" "$TMP/build" 2>&1); rc=$?
check "configures with the kit" "[ $rc -eq 0 ] || { echo \"\$out\" | tail -30; false; }"
cache=$TMP/build/CMakeCache.txt
for var in fmt_DIR nlohmann_json_DIR CLI11_DIR GTest_DIR OPENSSL_CRYPTO_LIBRARY ZLIB_LIBRARY_RELEASE \
           pkgcfg_lib_D5_HWLOC_hwloc PKG_CONFIG_EXECUTABLE; do
  value=$(sed -n "s/^$var:[A-Z]*=//p" "$cache")
  check "$var from the kit ($value)" "[[ '$value' == '$cfg'/* ]]"
done

check "kit-env.sh puts the build's kit-lib on the library path" \
  "grep -q 'LD_LIBRARY_PATH=.*$TMP/build/kit-lib' '$TMP/build/kit-env.sh'"
check "with the library the host lacks" "[ -L '$TMP/build/kit-lib/libd5kitonly.so.1' ]"
check "and not the kit's libcrypto, which the host has" "[ ! -e '$TMP/build/kit-lib/libcrypto.so.3' ]"
check "nor the kit's own folders" "! grep -q 'LD_LIBRARY_PATH=.*$cfg/usr/lib' '$TMP/build/kit-env.sh'"

if [[ $MPI == mpi ]]; then
  value=$(sed -n "s/^MPI_mpi_LIBRARY:[A-Z]*=//p" "$cache")
  check "libmpi from the kit ($value)" "[[ '$value' == '$cfg'/* ]]"
  check "mpiexec is the kit's" "grep -q '^MPIEXEC_EXECUTABLE:FILEPATH=$TMP/build/kit-bin/mpirun$' '$cache'"
  check "kit-env.sh relocates Open MPI to the kit" "grep -q 'OPAL_PREFIX=\"$cfg/usr\"' '$TMP/build/kit-env.sh'"
  printf '%s\n' '#include <mpi.h>' '#include <stdio.h>' \
    'int main(int c, char** v) { int r, s, x; MPI_Init(&c, &v); MPI_Comm_rank(MPI_COMM_WORLD, &r); x = r + 1;' \
    '  MPI_Allreduce(&x, &s, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD); printf("rank %d sum %d\n", r, s); MPI_Finalize(); }' \
    > "$TMP/hello.c"
  out=$(source "$TMP/build/kit-env.sh" && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
        OMPI_MCA_rmaps_base_oversubscribe=1 && mpicc "$TMP/hello.c" -o "$TMP/hello" && mpirun -np 2 "$TMP/hello" 2>&1); rc=$?
  echo "$out" | tail -5
  check "a program built with the kit's mpicc runs on 2 ranks under its mpirun" \
    "[ $rc -eq 0 ] && [ \$(grep -c 'sum 3' <<<\"\$out\") -eq 2 ]"
fi

out=$("$SRC/scripts/make-build-kit.sh" --limit-mib 1 --debs "$TMP/debs" "$TMP/small" 2>&1); rc=$?
echo "$out" > "$TMP/out"
check "a kit over its limit is refused" "[ $rc -eq 1 ] && grep -q 'over the limit of 1 MiB' '$TMP/out'"
check "and nothing is written" "[ ! -e '$TMP/small' ]"
out=$("$SRC/scripts/build-with-kit.sh" "$TMP" "$TMP/b2" 2>&1); rc=$?
echo "$out" > "$TMP/out"
check "a folder that is not a kit is refused" "[ $rc -eq 1 ] && grep -q 'is not a build kit' '$TMP/out'"
mkdir -p "$TMP/old/share/cmake/Torch"
echo 'set(TORCH_CXX_FLAGS "-D_GLIBCXX_USE_CXX11_ABI=0")' > "$TMP/old/share/cmake/Torch/TorchConfig.cmake"
out=$(cd "$SRC" && D5_TORCH_PREFIX=$TMP/old scripts/build-with-kit.sh "$kit" "$TMP/b3" 2>&1); rc=$?
echo "$out" > "$TMP/out"
check "a LibTorch of the pre-C++11 string ABI is refused" \
  "[ $rc -eq 1 ] && grep -q 'pre-C++11 string ABI' '$TMP/out' && [ ! -e '$TMP/b3' ]"
exit $fail
