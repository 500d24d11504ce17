#!/usr/bin/env bash
# scripts/pack-for-host.sh: a packed program runs from the folder with an empty environment and
# its libraries found there; a pack over the size limit is refused, names the largest libraries
# and writes nothing.
set -u
SRC=$1 PROGRAM=$2
source "$(dirname "$0")/script_checks.sh"

out=$("$SRC/scripts/pack-for-host.sh" "$TMP/pack" "$PROGRAM" 2>&1); rc=$?
check "packs" "[ $rc -eq 0 ]"
echo "$out"
check "manifest names a packed library and its origin" "grep -q 'libstdc++.so.6 <- ' '$TMP/pack/MANIFEST'"
check "manifest leaves glibc to the host" "sed -n '/host must provide/,\$p' '$TMP/pack/MANIFEST' | grep -q 'libc.so.6'"
check "glibc is not packed" "[ ! -e '$TMP/pack/lib/libc.so.6' ]"
check "every program finds its libraries" "env -i '$TMP/pack/run' --check"
name=$(basename "$PROGRAM")
check "the program runs from the pack with an empty environment" \
  "env -i '$TMP/pack/run' '$name' --gtest_brief=1 > '$TMP/log' 2>&1 || { cat '$TMP/log'; false; }"
# A library the pack relies on, moved away: --check names it.
victim=$(ls "$TMP/pack/lib" | grep -m1 libfmt || ls "$TMP/pack/lib" | head -1)
mv "$TMP/pack/lib/$victim" "$TMP/$victim"
check "a missing library is named" "env -i '$TMP/pack/run' --check | grep -q '$victim'"
check "and --check fails" "! env -i '$TMP/pack/run' --check > /dev/null"

out=$("$SRC/scripts/pack-for-host.sh" --limit-mib 1 "$TMP/small" "$PROGRAM" 2>&1); rc=$?
check "over the limit is refused" "[ $rc -ne 0 ]"
check "with the limit and the largest library named" "grep -q 'over the 1 MiB limit' <<<'$out' && grep -q 'MiB  lib' <<<'$out'"
check "and nothing is written" "[ ! -e '$TMP/small' ]"
exit $fail
