#!/usr/bin/env bash
# Debian's dnsmasq: the real DNS server the custom domain suites start on a free loopback port
# (test/support/dnsmasq.ts), each with the TXT records its tests publish. Nothing runs as a
# service: the suites start and stop their own instances.
#
#   scripts/dnsmasq.sh install   install the package when missing (the system service is not started)
#   scripts/dnsmasq.sh status    exit 0 and print the binary when installed, exit 3 when not
set -euo pipefail

bin() { command -v dnsmasq 2>/dev/null || { [[ -x /usr/sbin/dnsmasq ]] && echo /usr/sbin/dnsmasq; } || true; }

install() {
  if [[ -n "$(bin)" ]]; then bin; return 0; fi
  echo "dnsmasq.sh: installing dnsmasq from Debian (once)" >&2
  local sudo=()
  [[ "$(id -u)" == 0 ]] || sudo=(sudo)
  # The package's postinst would start the system service on port 53; a temporary
  # policy-rc.d forbids that, unless one already exists.
  local policy=/usr/sbin/policy-rc.d ours=
  if [[ ! -e "$policy" ]]; then
    printf '#!/bin/sh\nexit 101\n' | "${sudo[@]}" tee "$policy" >/dev/null
    "${sudo[@]}" chmod 755 "$policy"
    ours=1
    trap "${sudo[*]} rm -f $policy" EXIT
  fi
  local apt=("${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends dnsmasq)
  if ! "${apt[@]}" >&2; then
    "${sudo[@]}" apt-get update -q >&2
    "${apt[@]}" >&2
  fi
  if [[ -n "$ours" ]]; then "${sudo[@]}" rm -f "$policy"; trap - EXIT; fi
  [[ -n "$(bin)" ]] || { echo "dnsmasq.sh: dnsmasq did not install" >&2; exit 1; }
  bin
}

case "${1:-}" in
  install) install ;;
  status) if [[ -n "$(bin)" ]]; then bin; else exit 3; fi ;;
  *) echo "usage: scripts/dnsmasq.sh install|status" >&2; exit 2 ;;
esac
