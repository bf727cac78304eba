#!/bin/sh
# Installs the locked dependencies when node_modules is missing or older than the lockfile,
# so `npm start` and `npm test` work on a fresh clone.
set -e
cd "$(dirname "$0")/.."
if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  echo "installing dependencies (npx -y npm@10.9.9 ci, about a minute and 1.4 GB the first time)..." >&2
  npx -y npm@10.9.9 ci --no-audit --no-fund >&2
fi
