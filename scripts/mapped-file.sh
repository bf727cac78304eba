#!/bin/sh
# Prints the path of .build/mapped-file.node (infra/fs/mapped-file.c: a file mapped shared, for
# the click spool), building it first with the machine's C compiler against node's own headers
# when it is missing or older than its source. Fails with a line saying why; the spool then
# writes its files with a system call a turn instead (apps/redirector/ClickSpool.ts).
cd "$(dirname "$0")/.." || exit 1
OUT=.build/mapped-file.node
SRC=infra/fs/mapped-file.c
if [ ! -f "$OUT" ] || [ "$SRC" -nt "$OUT" ]; then
  mkdir -p .build 2>/dev/null
  HEADERS=$(node -p 'require("path").resolve(process.execPath, "../../include/node")' 2>/dev/null)
  if [ ! -f "$HEADERS/node_api.h" ]; then
    echo "scripts/mapped-file.sh: could not build $OUT: node's headers are not in $HEADERS" >&2
    exit 1
  fi
  if ! { ${CC:-cc} -O2 -Wall -Werror -shared -fPIC -I"$HEADERS" -DNODE_GYP_MODULE_NAME=mapped_file \
    -o "$OUT.$$" "$SRC" && mv "$OUT.$$" "$OUT"; }; then
    rm -f "$OUT.$$"
    echo "scripts/mapped-file.sh: could not build $OUT: ${CC:-cc} failed on $SRC (its message is above)" >&2
    exit 1
  fi
fi
echo "$(pwd)/$OUT"
