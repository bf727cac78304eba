#!/bin/sh
# Installs the locked dependencies when node_modules is missing or does not hold what the
# lockfile locks (compared by name and version, not by file times: a fresh checkout is newer
# than any install), so `npm start` and `npm test` work on a fresh clone.
set -e
cd "$(dirname "$0")/.."
if ! node -e '
  const fs = require("fs")
  const locked = JSON.parse(fs.readFileSync("package-lock.json", "utf8")).packages
  const installed = JSON.parse(fs.readFileSync("node_modules/.package-lock.json", "utf8")).packages
  for (const [p, meta] of Object.entries(locked)) {
    // Optional packages of other platforms are never installed here.
    if (p === "" || meta.optional) continue
    if (installed[p]?.version !== meta.version) process.exit(1)
  }
' 2>/dev/null; then
  echo "installing dependencies (npx -y npm@10.9.9 ci: about a minute and 1.4 GB the first time)..." >&2
  npx -y npm@10.9.9 ci --no-audit --no-fund >&2
fi
