#!/usr/bin/env bash
# Packs built deep500 programs with the shared libraries they load into one folder, for a host
# that has no package registry (a cluster's GPU nodes): copy the folder over, then
#   FOLDER/run --check          every program finds its libraries (else the missing ones)
#   FOLDER/run d5 info          any packed program, with the packed libraries first
#
# usage: scripts/pack-for-host.sh [--limit-mib N] OUT_DIR PROGRAM...
#   PROGRAM: a built executable (build/bin/d5, build/bin/d5_test_cuda, ...)
#
# Left out, because the host must provide its own: glibc (its loader, libc, libm, libdl,
# libpthread, librt, libresolv), the NVIDIA driver (libcuda, libnvidia-*), and the CUDA math and
# communication libraries (cuBLAS, cuBLASLt, cuDNN, NCCL: hundreds of MiB, installed with the
# host's CUDA or PyTorch); the CUDA runtime (libcudart) is packed. MANIFEST lists every library, where it came from, and what the
# host must have. The folder must stay under the limit (default 60 MiB), else nothing is written
# and the largest libraries are named: configure the build without the backends whose
# frameworks are large (-DD5_WITH_TORCH=OFF) for such a host.
set -euo pipefail

limit_mib=60
if [[ ${1:-} == --limit-mib ]]; then
  limit_mib=$2
  shift 2
fi
if [[ $# -lt 2 ]]; then
  sed -n '2,17p' "$0" >&2
  exit 2
fi
out=$1
shift
programs=("$@")
for p in "${programs[@]}"; do
  [[ -x $p && -f $p ]] || { echo "pack-for-host: $p is not a built program" >&2; exit 2; }
done

host_provided='^(linux-vdso|ld-linux|libc\.so|libm\.so|libdl\.so|libpthread\.so|librt\.so|libresolv\.so|libcuda\.so|libnvidia-|libcublas\.so|libcublasLt\.so|libcudnn|libnccl\.so)'

# Every library the programs load (ldd resolves the whole closure), path by name.
declare -A path_of=()
missing=()
for p in "${programs[@]}"; do
  while read -r name arrow path _; do
    [[ $arrow == "=>" ]] || continue
    if [[ $path == "not" ]]; then
      missing+=("$name (needed by $(basename "$p"))")
    else
      path_of[$name]=$path
    fi
  done < <(ldd "$p")
done
if ((${#missing[@]})); then
  echo "pack-for-host: libraries not found here: ${missing[*]}" >&2
  exit 1
fi

packed=() host=()
total=0
for name in "${!path_of[@]}"; do
  if [[ $name =~ $host_provided ]]; then
    host+=("$name")
  else
    packed+=("$name")
    total=$((total + $(stat -L -c %s "${path_of[$name]}")))
  fi
done
for p in "${programs[@]}"; do total=$((total + $(stat -c %s "$p"))); done

if ((total > limit_mib * 1024 * 1024)); then
  echo "pack-for-host: $((total / 1048576)) MiB is over the ${limit_mib} MiB limit; the largest:" >&2
  for name in "${packed[@]}"; do echo "$(stat -L -c %s "${path_of[$name]}") $name"; done | sort -rn | head -5 |
    while read -r bytes name; do echo "  $((bytes / 1048576)) MiB  $name" >&2; done
  echo "configure a build without the backends these belong to (e.g. -DD5_WITH_TORCH=OFF)" >&2
  exit 1
fi

rm -rf "$out"
mkdir -p "$out/bin" "$out/lib"
for p in "${programs[@]}"; do cp "$p" "$out/bin/"; done
for name in "${packed[@]}"; do cp -L "${path_of[$name]}" "$out/lib/$name"; done

{
  echo "# packed by scripts/pack-for-host.sh on $(date -u +%Y-%m-%dT%H:%M:%SZ) from $(uname -n)"
  echo "programs: $(for p in "${programs[@]}"; do basename "$p"; done | tr '\n' ' ')"
  echo "size_bytes: $total"
  echo "packed (library <- origin [Debian package]):"
  for name in $(printf '%s\n' "${packed[@]}" | sort); do
    origin=${path_of[$name]}
    pkg=""
    # dpkg knows a file by the path its package installed it at (/usr/lib on merged-/usr systems).
    for candidate in "$origin" "$(readlink -f "$origin")" "/usr$origin" "/usr$(readlink -f "$origin")"; do
      pkg=$(dpkg -S "$candidate" 2>/dev/null | head -1 | cut -d: -f1 || true)
      [[ -n $pkg ]] && break
    done
    echo "  $name <- $origin${pkg:+ [$pkg]}"
  done
  echo "the host must provide:"
  for name in $(printf '%s\n' "${host[@]}" | sort); do echo "  $name"; done
} > "$out/MANIFEST"

cat > "$out/run" <<'EOF'
#!/bin/sh
# run PROGRAM [ARGS...]: a packed program with the packed libraries first.
# run --check: whether every packed program finds every library it loads on this host.
here=$(cd "$(dirname "$0")" && pwd)
LD_LIBRARY_PATH="$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export LD_LIBRARY_PATH
if [ "${1:-}" = --check ]; then
  status=0
  # Every library packed here is still here (the host may have an incompatible one of that name).
  for name in $(sed -n 's/^  \(.*\) <- .*/\1/p' "$here/MANIFEST"); do
    [ -e "$here/lib/$name" ] || { echo "missing from the pack: lib/$name"; status=1; }
  done
  # And the host has what the pack leaves to it.
  for p in "$here"/bin/*; do
    if ldd "$p" | grep -q "not found"; then
      echo "$(basename "$p"): missing $(ldd "$p" | grep "not found" | awk '{print $1}' | tr '\n' ' ')"
      status=1
    fi
  done
  [ $status -eq 0 ] && echo "every packed program finds its libraries"
  exit $status
fi
[ $# -ge 1 ] || { echo "usage: run PROGRAM [ARGS...] | run --check" >&2; exit 2; }
program=$1
shift
exec "$here/bin/$program" "$@"
EOF
chmod +x "$out/run"
echo "packed ${#programs[@]} program(s) and ${#packed[@]} libraries into $out ($((total / 1048576)) MiB)"
