#!/usr/bin/env bash
# The include-layer check passes on this tree and fails, naming the file, the include and both
# layers, on copies with an include that goes up the layer order, a public header that includes a
# private one, or a backend that includes another backend's header.
set -u
SRC=$1
CHECK="$SRC/scripts/check-include-layers.py"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail=0
if ! out=$(python3 "$CHECK" "$SRC" 2>&1); then
  echo "FAIL this tree: $out"; fail=1
else
  echo "ok   this tree"
fi
expect_violation() {  # expect_violation NAME FILE LINE EXPECTED-MESSAGE
  local name=$1 file=$2 line=$3 msg=$4
  rm -rf "$TMP/tree" && mkdir -p "$TMP/tree" && cp -r "$SRC/include" "$SRC/src" "$TMP/tree/"
  printf '%s\n' "$line" >> "$TMP/tree/$file"
  if out=$(python3 "$CHECK" "$TMP/tree" 2>&1); then
    echo "FAIL $name: the check passed"; fail=1
  elif ! grep -qF "$msg" <<<"$out"; then
    echo "FAIL $name: message '$msg' missing: $out"; fail=1
  else
    echo "ok   $name"
  fi
}
expect_violation core-includes-net include/deep500/core/tensor.h '#include "deep500/net/network.h"' \
  'include/deep500/core/tensor.h:'
expect_violation up-the-order src/lv0/operator.cpp '#include "deep500/train/trainer.h"' \
  'op includes "deep500/train/trainer.h" of layer train, which lies above it'
expect_violation public-includes-private include/deep500/train/dataset.h '#include "lv2/images/jpeg.h"' \
  'public header includes private "lv2/images/jpeg.h"'
expect_violation backend-includes-backend src/backends/onednn/conv.cpp '#include "../reference/ops/nn_common.h"' \
  'backend onednn includes "../reference/ops/nn_common.h" of backend reference'
expect_violation backend-includes-private src/backends/torch/torch_op.cpp '#include "../../core/digest.h"' \
  'backend includes private "../../core/digest.h" of layer core'
touch "$TMP/x" && mkdir -p "$TMP/tree2/include/deep500" && cp -r "$SRC/src" "$TMP/tree2/" && \
  cp -r "$SRC/include/deep500/core" "$TMP/tree2/include/deep500/" && touch "$TMP/tree2/include/deep500/flat.h"
if out=$(python3 "$CHECK" "$TMP/tree2" 2>&1) || ! grep -q "flat.h: a public header outside the layer folders" <<<"$out"; then
  echo "FAIL flat-header: $out"; fail=1
else
  echo "ok   flat-header"
fi
exit $fail
