#!/bin/sh
# Starts one redirector (apps/redirector/main.ts) the way it is meant to run: `npm run
# start:redirector`, the benchmarks and the process tests all start it through this file.
# Node flags after the script's name (a CPU profile, a perf map) are passed on.
#
# - GLIBC_TUNABLES=glibc.malloc.hugetlb=1: glibc asks the kernel for transparent huge pages
#   (madvise) for the large blocks it maps, the slug table's buckets among them (171 MB for a
#   million links), so a random link's lookup misses the TLB far less: 358 and 413 ns of CPU
#   against 468 and 482 with 4 KiB pages (`bench/slug-table-lookup.ts` run both ways, a 2-core
#   VM; docs/redirect-tier.md). RSS stays the same. A GLIBC_TUNABLES the caller set is kept,
#   and one that names glibc.malloc.hugetlb decides (`=0`: no huge pages). Without THP
#   (`never` in /sys/kernel/mm/transparent_hugepage/enabled) or without glibc it changes
#   nothing; the redirector's `slug table loaded` line says how many MB are in huge pages.
# - --max-semi-space-size=32: a larger young generation means fewer collections under load
#   (3-6% more redirects per second with click capture on).
# - It runs the esbuild bundle of apps/redirector/main.ts (scripts/bundle.mjs, in .build/,
#   rebuilt when a source changed), not the TypeScript through tsx: ready 3 s sooner with a
#   million links on a 2-core VM, 60 MB less RSS. Where .build/ cannot be written and holds no
#   fresh bundle, it says so and runs the sources through tsx.
# - REDIRECTOR_PEER_CACHE=on (the default; `off` to go without): LD_PRELOAD of
#   .build/peer-address.so, built from infra/http/peer-address.c by scripts/peer-address.sh
#   with the machine's C compiler when missing or older than its source. uWebSockets.js asks
#   the kernel for the peer's address (getpeername) on every click; the library answers from
#   the address accept returned, kept per socket until it is closed: 3.4 us of CPU less a
#   click on a VM whose kernel isolates its page tables (docs/redirect-tier.md). Without a C
#   compiler it says so and starts without it.
cd "$(dirname "$0")/.." || exit 1
case "${REDIRECTOR_PEER_CACHE:-on}" in
  on | 1 | true)
    if PEER_SO=$(sh scripts/peer-address.sh); then
      LD_PRELOAD="$PEER_SO${LD_PRELOAD:+:$LD_PRELOAD}"
      export LD_PRELOAD
    else
      echo "scripts/redirector.sh: starting without the peer-address cache" >&2
    fi
    ;;
  off | 0 | false) ;;
  *)
    echo "start-up failed: REDIRECTOR_PEER_CACHE must be on or off (got ${REDIRECTOR_PEER_CACHE})" >&2
    exit 1
    ;;
esac
case ":${GLIBC_TUNABLES:-}" in
  *:glibc.malloc.hugetlb=*) ;;
  *) GLIBC_TUNABLES="${GLIBC_TUNABLES:+$GLIBC_TUNABLES:}glibc.malloc.hugetlb=1" ;;
esac
export GLIBC_TUNABLES
if BUNDLE=$(node scripts/bundle.mjs redirector apps/redirector/main.ts); then
  exec node --max-semi-space-size=32 "$@" "$BUNDLE"
fi
echo "scripts/redirector.sh: no bundle (see above); running apps/redirector/main.ts through tsx" >&2
exec node --max-semi-space-size=32 "$@" --import tsx apps/redirector/main.ts
