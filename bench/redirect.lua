-- bench/redirect.sh's wrk script. Every thread sends GET {path} (a click) until
-- BENCH_GET_SECONDS have passed, then HEAD {path} (a redirect that is not a click) until
-- wrk stops. So no click is in flight when wrk cuts its connections, and the number of
-- GETs sent is exactly the number of clicks the redirector saw: bench/redirect.sh compares
-- it with what the analytics count. The User-Agent is a browser's (wrk sends none, and a
-- request without one is classified as a bot).
-- With BENCH_RANDOM=N (bench/redirect-scale.sh, bench/redirect-costs.sh) every GET asks for
-- BENCH_PATH .. k with k random in 1..N (seeded per thread), so the lookups spread over the
-- whole slug table, and a query `?r=` and the thread's count of GETs, which no server reads.
-- The query makes every request a new string for any N: wrk's LuaJIT interns strings, and a
-- request equal to the last one (N = 1: always /s1) costs wrk 0.3 us less than a new string
-- and its collection (0.08 against 0.35-0.38 us in luajit), which made the one-link phases
-- look 1-4% faster than the random ones for wrk's sake, not the server's. For the same reason
-- the path and its query are one string.format: the slug's digits on their own were a string
-- too, new with a random k and found again with N = 1 (0.05-0.07 us a request more with the
-- random slugs in luajit, ~0.4% of a request's machine time; one format: -0.02-0.05).
-- With BENCH_PAD=W as well, k has W digits (zeros in front: bench/seed-links.ts's WIDTH), so
-- the one-link phases' request (/s0000001) is as long as any random one's.
local threads = {}

function setup(thread)
  table.insert(threads, thread)
end

function init(args)
  gets = 0
  heads = 0
  started = os.time()
  get_seconds = tonumber(os.getenv("BENCH_GET_SECONDS") or "8")
  path = os.getenv("BENCH_PATH") or "/"
  local ua = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36"
  headers = { ["User-Agent"] = ua }
  -- BENCH_HOST: the Host header (a custom domain's phase); unset: wrk's, the address.
  local host = os.getenv("BENCH_HOST")
  if host ~= nil and host ~= "" then headers["Host"] = host end
  get_req = wrk.format("GET", path, headers)
  head_req = wrk.format("HEAD", path, headers)
  random_n = tonumber(os.getenv("BENCH_RANDOM") or "0")
  if random_n > 0 then
    -- The path with the slug's k and the query's count ("%" in BENCH_PATH doubled).
    path_format = path:gsub("%%", "%%%%") .. "%0" .. (tonumber(os.getenv("BENCH_PAD") or "0") or 0) .. "d?r=%d"
    math.randomseed(os.time() + (tonumber(tostring({}):match("0x(%x+)") or "0", 16) or 0) % 100000)
  end
end

function request()
  if os.time() - started < get_seconds then
    gets = gets + 1
    if random_n > 0 then
      return wrk.format("GET", string.format(path_format, math.random(1, random_n), gets), headers)
    end
    return get_req
  end
  heads = heads + 1
  return head_req
end

function done(summary, latency, requests)
  local total_gets, total_heads = 0, 0
  for _, t in ipairs(threads) do
    total_gets = total_gets + t:get("gets")
    total_heads = total_heads + t:get("heads")
  end
  local secs = summary.duration / 1e6
  local e = summary.errors
  io.write(string.format(
    'WRK_RESULT {"requests":%d,"gets":%d,"heads":%d,"duration_s":%.3f,"rps":%.1f,"p50_ms":%.3f,"p99_ms":%.3f,"non3xx":%d,"socket_errors":%d}\n',
    summary.requests, total_gets, total_heads, secs, (summary.requests - e.status) / secs,
    latency:percentile(50) / 1000, latency:percentile(99) / 1000,
    e.status, e.connect + e.read + e.write + e.timeout))
end
