# Sourced by the shell tests of scripts (check_*.sh): a scratch folder $TMP removed at exit, and
# check NAME CONDITION, which prints "ok" or "FAIL" and makes the test exit 1 at its end
# (exit $fail) when any condition failed.
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail=0
check() { if eval "$2"; then echo "ok   $1"; else echo "FAIL $1"; fail=1; fi; }
