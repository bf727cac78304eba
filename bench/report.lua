-- Shared by every bench/api.sh phase: after the run, print one machine-readable line
--   WRK_RESULT {"requests":N,"duration_s":S,"rps":R,"p50_ms":..,"p99_ms":..,"non2xx":N,"errors":N}
-- "rps" counts only responses with a 2xx/3xx status (wrk's own Requests/sec counts all).
-- Loaded with dofile() by create.lua; used directly (-s bench/report.lua) for GET phases.
function done(summary, latency, requests)
  local secs = summary.duration / 1e6
  local e = summary.errors
  local socket_errors = e.connect + e.read + e.write + e.timeout
  local ok = summary.requests - e.status
  io.write(string.format(
    'WRK_RESULT {"requests":%d,"duration_s":%.3f,"rps":%.1f,"p50_ms":%.2f,"p99_ms":%.2f,"non2xx":%d,"socket_errors":%d}\n',
    summary.requests, secs, ok / secs,
    latency:percentile(50) / 1000, latency:percentile(99) / 1000,
    e.status, socket_errors))
end
