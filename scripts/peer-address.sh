#!/bin/sh
# Prints the path of .build/peer-address.so (infra/http/peer-address.c: the peer address a socket
# was accepted with, kept per socket, for LD_PRELOAD), building it first with the machine's C
# compiler when it is missing or older than its source. Fails with a line saying why.
# Beside it, .build/peer-address-view.node (infra/http/peer-address-view.c: the Node-API addon
# that shows a request handler its connection's peer without a call), built the same way
# against node's own headers; where they are missing it says so and the redirector reads
# addresses through uWebSockets.js, from the library's table.
cd "$(dirname "$0")/.." || exit 1
SO=.build/peer-address.so
SRC=infra/http/peer-address.c
if [ ! -f "$SO" ] || [ "$SRC" -nt "$SO" ]; then
  mkdir -p .build 2>/dev/null
  COMPILER=${CC:-cc}
  # Its first word: CC may carry a wrapper or flags ("ccache gcc").
  if ! command -v "${COMPILER%% *}" >/dev/null 2>&1; then
    echo "scripts/peer-address.sh: could not build $SO: no C compiler (${CC:-cc}; apt-get install gcc libc6-dev)" >&2
    exit 1
  fi
  if ! { ${CC:-cc} -O2 -Wall -Werror -shared -fPIC -o "$SO.$$" "$SRC" -ldl && mv "$SO.$$" "$SO"; }; then
    rm -f "$SO.$$"
    echo "scripts/peer-address.sh: could not build $SO: ${CC:-cc} failed on $SRC (its message is above)" >&2
    exit 1
  fi
fi
VIEW=.build/peer-address-view.node
VIEW_SRC=infra/http/peer-address-view.c
if [ ! -f "$VIEW" ] || [ "$VIEW_SRC" -nt "$VIEW" ]; then
  HEADERS=$(node -p 'require("path").resolve(process.execPath, "../../include/node")' 2>/dev/null)
  if ! { [ -f "$HEADERS/node_api.h" ] &&
    ${CC:-cc} -O2 -Wall -Werror -shared -fPIC -I"$HEADERS" -DNODE_GYP_MODULE_NAME=peer_address_view \
      -o "$VIEW.$$" "$VIEW_SRC" -ldl && mv "$VIEW.$$" "$VIEW"; }; then
    rm -f "$VIEW.$$"
    echo "scripts/peer-address.sh: could not build $VIEW (it needs node's headers in $HEADERS); addresses are read through uWebSockets.js" >&2
  fi
fi
echo "$(pwd)/$SO"
