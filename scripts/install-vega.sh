#!/usr/bin/env bash
# Installs the Vega, Vega-Lite and vega-embed browser bundles that `d5 report` inlines into its
# pages, at the versions pinned by third_party/vega/package-lock.json, into
# third_party/vega/node_modules (git-ignored). Called by install-deps.sh; idempotent: when the
# installed tree matches the lock file it only compares a checksum.
set -euo pipefail
cd "$(dirname "$0")/../third_party/vega"

stamp=node_modules/.d5-lock.sha256
want=$(sha256sum package-lock.json | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  echo "install-vega: vega bundles present (third_party/vega/node_modules)"
  exit 0
fi

if ! command -v npm >/dev/null 2>&1; then
  # Debian's npm (and the nodejs it depends on) where no Node.js is installed at all.
  echo "install-vega: installing Debian's npm"
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -q
  $SUDO apt-get install -y -q --no-install-recommends npm
fi

echo "install-vega: npm ci (vega, vega-lite, vega-embed as pinned in package-lock.json)"
# No install scripts run: only the prebuilt browser bundles are used.
npm ci --ignore-scripts --no-audit --no-fund --omit=dev --loglevel=error
echo "$want" > "$stamp"
echo "install-vega: done"
