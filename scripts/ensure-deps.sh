#!/bin/sh
# Installs the locked dependencies when node_modules is missing or older than the lockfile,
# so `npm start` and `npm test` work on a fresh clone.
set -e
cd "$(dirname "$0")/.."
if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  echo "installing dependencies (npm install)..." >&2
  npm install --no-audit --no-fund --loglevel=warn >&2
fi
