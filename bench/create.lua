-- wrk script for POST /v1/links: every request gets a fresh Idempotency-Key and a fresh
-- destination URL. Env: BENCH_API_KEY (bearer secret), BENCH_RUN_ID (distinguishes runs
-- and the warm-up from the measured phase), BENCH_DIR (where report.lua lives).
local api_key = os.getenv("BENCH_API_KEY") or error("BENCH_API_KEY is not set")
local run_id = os.getenv("BENCH_RUN_ID") or tostring(os.time())
local bench_dir = os.getenv("BENCH_DIR") or "bench"

local thread_counter = 0
function setup(thread)
  thread_counter = thread_counter + 1
  thread:set("tid", thread_counter)
end

local counter, salt
function init(args)
  tid = tid or 0 -- global, set by setup() through thread:set
  counter = 0
  math.randomseed(os.time() * 1000 + tid)
  salt = string.format("%08x", math.random(0, 0x7fffffff))
end

local headers = {
  ["Authorization"] = "Bearer " .. api_key,
  ["Content-Type"] = "application/json",
}

function request()
  counter = counter + 1
  local n = string.format("%s-%d-%s-%d", run_id, tid, salt, counter)
  headers["Idempotency-Key"] = "bench-" .. n
  local body = '{"url":"https://example.com/bench/' .. n .. '"}'
  return wrk.format("POST", "/v1/links", headers, body)
end

dofile(bench_dir .. "/report.lua")
