#!/bin/sh
# Prints the path of .build/peer-address.so (infra/http/peer-address.c: the peer address a socket
# was accepted with, kept per socket, for LD_PRELOAD), building it first with the machine's C
# compiler when it is missing or older than its source. Fails with a line saying why.
cd "$(dirname "$0")/.." || exit 1
SO=.build/peer-address.so
SRC=infra/http/peer-address.c
if [ ! -f "$SO" ] || [ "$SRC" -nt "$SO" ]; then
  mkdir -p .build 2>/dev/null
  if ! { ${CC:-cc} -O2 -Wall -Werror -shared -fPIC -o "$SO.$$" "$SRC" -ldl && mv "$SO.$$" "$SO"; }; then
    rm -f "$SO.$$"
    echo "scripts/peer-address.sh: could not build $SO (it needs a C compiler: apt-get install gcc)" >&2
    exit 1
  fi
fi
echo "$(pwd)/$SO"
