#!/usr/bin/env bash
# `cmake --install` gives a tree a user's project builds against: the installed d5 runs from it
# (its own data, not the sources'), and examples/extend_deep500 (a new operator and a new
# optimizer registered from outside) finds it with find_package(deep500), builds and passes.
# `cpack -G DEB` packs the same tree as a Debian package with its run-time dependencies.
set -u
BUILD=$1
SRC=$2
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
PREFIX=$TMP/prefix
fail=0
step() {  # step NAME command...
  local name=$1
  shift
  if "$@" >"$TMP/$name.log" 2>&1; then echo "ok   $name"; else echo "FAIL $name:"; tail -20 "$TMP/$name.log"; fail=1; fi
}
step install cmake --install "$BUILD" --prefix "$PREFIX"
for f in bin/d5 include/deep500/core/tensor.h include/deep500/backends/builtin.h lib/cmake/deep500/deep500Config.cmake \
         share/deep500/suites/deepbench/gemm_training.csv share/deep500/recipes/quickstart.yaml; do
  [ -e "$PREFIX/$f" ] || { echo "FAIL the installed tree lacks $f"; fail=1; }
done
ls "$PREFIX"/lib/libdeep500.so* >/dev/null 2>&1 || { echo "FAIL the installed tree lacks lib/libdeep500.so"; fail=1; }
# The installed d5 reads the installed suites: a suite only the installed tree has is listed.
cp "$PREFIX/share/deep500/suites/deepbench/gemm_training.csv" "$PREFIX/share/deep500/suites/deepbench/gemm_installcheck.csv"
step installed-d5 "$PREFIX/bin/d5" ops bench --list-suites
grep -q "deepbench-gemm-installcheck" "$TMP/installed-d5.log" || { echo "FAIL the installed d5 does not read its own suites"; fail=1; }
step installed-info "$PREFIX/bin/d5" info
# The installed d5 draws a report with the installed Vega bundles (where the build had them).
if [ -d "$SRC/third_party/vega/node_modules/vega" ]; then
  step installed-report env -u D5_VEGA_DIR "$PREFIX/bin/d5" report "$SRC/fuzz/corpus/results/deepbench-gemm-training.json" \
       -o "$TMP/report.html"
  [ -s "$TMP/report.html" ] || { echo "FAIL the installed d5 drew no report"; fail=1; }
fi
# A program of the user's own, outside PREFIX/bin, linked against the installed libdeep500, finds
# the installed data through the library's own path.
cat > "$TMP/probe.cpp" <<'EOF'
#include <deep500/core/data_paths.h>
#include <cstdio>
int main() { std::puts(d5::locate_data("D5_PROBE_UNSET", "/nonexistent", "share/deep500/recipes").c_str()); }
EOF
step build-probe "${CXX:-c++}" -std=c++20 "$TMP/probe.cpp" -I"$PREFIX/include" -L"$PREFIX/lib" -ldeep500 \
     -Wl,-rpath,"$PREFIX/lib" -o "$TMP/probe"
step run-probe "$TMP/probe"
grep -qx "$(realpath "$PREFIX")/share/deep500/recipes" "$TMP/run-probe.log" ||
  { echo "FAIL a program linked against the installed libdeep500 does not find its data: $(cat "$TMP/run-probe.log")"; fail=1; }
step configure-example cmake -S "$SRC/examples/extend_deep500" -B "$TMP/example" -DCMAKE_PREFIX_PATH="$PREFIX" \
     -DCMAKE_BUILD_TYPE=Release
step build-example cmake --build "$TMP/example" -j 2
step run-example "$TMP/example/extend_deep500"
cat "$TMP/run-example.log"
step cpack cpack -G DEB -B "$TMP/package" --config "$BUILD/CPackConfig.cmake"
deb=$(ls "$TMP"/package/*.deb 2>/dev/null | head -1)
if [ -z "$deb" ]; then
  echo "FAIL cpack made no .deb"; fail=1
else
  dpkg-deb -c "$deb" > "$TMP/contents.txt"
  for f in ./usr/bin/d5 ./usr/include/deep500/core/tensor.h ./usr/lib/cmake/deep500/deep500Config.cmake \
           ./usr/share/deep500/recipes/quickstart.yaml; do
    grep -q " $f\$" "$TMP/contents.txt" || { echo "FAIL the package lacks $f"; fail=1; }
  done
  grep -q "libdeep500.so" "$TMP/contents.txt" || { echo "FAIL the package lacks libdeep500.so"; fail=1; }
  depends=$(dpkg-deb -f "$deb" Depends)
  echo "package $(basename "$deb"): Depends: $depends"
  for d in libfmt-dev libc6; do
    echo "$depends" | grep -q "$d" || { echo "FAIL the package does not depend on $d"; fail=1; }
  done
fi
exit $fail
