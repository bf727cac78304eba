# bench/redirect.sh's custom-domain part (sourced): a verified custom domain for the bench
# account, proven through a real DNS server (Debian's dnsmasq on a free loopback port), so
# that the redirector's custom-host path can be measured beside the canonical one.
#
#   custom_domain_dns            before the service starts: picks the port, exports DNS_SERVERS
#   custom_domain_verify HOST    registers HOST, publishes its TXT proof, verifies it
#
# Without dnsmasq the custom-host phase is skipped (CUSTOM_HOST stays empty) and says so.

CUSTOM_HOST="" DNSMASQ_PID=""
DNSMASQ_BIN=$(command -v dnsmasq || ls /usr/sbin/dnsmasq 2>/dev/null || true)

custom_domain_dns() {
  if [ -z "$DNSMASQ_BIN" ]; then
    log "bench: dnsmasq not found (apt-get install dnsmasq): the custom-host phase is skipped"
    return 0
  fi
  free_port DNS_PORT 18553
  export DNS_SERVERS=127.0.0.1:$DNS_PORT
}

custom_domain_verify() {
  [ -n "$DNSMASQ_BIN" ] || return 0
  local host=$1 body record value id state
  body=$(curl -sS --max-time 30 -X POST "$API/v1/domains" -H "Authorization: Bearer $API_KEY" \
    -H "Content-Type: application/json" -H "Idempotency-Key: bench-domain-$$-$RANDOM$RANDOM" \
    --data "{\"hostname\":\"$host\"}") || die "could not register $host"
  id=$(printf '%s' "$body" | json_field data.id) || die "could not register $host: $body"
  record=$(printf '%s' "$body" | json_field data.verification.record_name)
  value=$(printf '%s' "$body" | json_field data.verification.record_value)
  printf 'port=%s\nlisten-address=127.0.0.1\nbind-interfaces\nno-resolv\nno-hosts\nlocal=/test/\ntxt-record=%s,"%s"\n' \
    "$DNS_PORT" "$record" "$value" >"$TMP/dnsmasq.conf"
  "$DNSMASQ_BIN" --keep-in-foreground --conf-file="$TMP/dnsmasq.conf" --user=root --pid-file= >"$TMP/dnsmasq.log" 2>&1 &
  DNSMASQ_PID=$!
  for _ in $(seq 1 50); do
    state=$(curl -sS --max-time 30 -X POST "$API/v1/domains/$id/verify" -H "Authorization: Bearer $API_KEY" \
      -H "Idempotency-Key: bench-verify-$$-$RANDOM$RANDOM" | json_field data.state) || true
    [ "$state" = verified ] && break
    sleep 0.2
  done
  [ "$state" = verified ] || die "$host did not verify ($(cat "$TMP/dnsmasq.log"))"
  CUSTOM_HOST=$host
  log "bench: custom domain $host verified through dnsmasq on 127.0.0.1:$DNS_PORT"
}

# wait_custom_host PORT PATH: until the redirector serves PATH on the custom host.
wait_custom_host() {
  [ -n "$CUSTOM_HOST" ] || return 0
  local code
  for _ in $(seq 1 600); do
    code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 -H "Host: $CUSTOM_HOST" "http://127.0.0.1:$1$2" || true)
    [ "$code" = 302 ] && return 0
    sleep 0.2
  done
  die "the redirector on port $1 did not serve $2 on $CUSTOM_HOST"
}
