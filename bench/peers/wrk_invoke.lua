-- bench-peers' wrk phases (bench/peers/wrk.py): keep-alive POSTs of one MCP tools/call, every
-- answer classified, OK answers and refusals timed apart.
--
--   wrk -t1 -c C -d S --timeout 15s -s bench/peers/wrk_invoke.lua URL -- CONFIG
--
-- CONFIG is a Lua file bench/peers/wrk.py writes (config_lua); it returns a table:
--   policy  "resend": a call refused with WORKFLOW_CAPACITY_EXHAUSTED is sent again (the same
--           arguments and requestId) as the next request written; "fresh": every request is a
--           new call with a new requestId, refused or not
--   heads   request lines and headers without Content-Length, one per user (round-robin)
--   body    four slices: body[1] .. JSON-RPC id .. body[2] .. creditScore .. body[3] ..
--           requestId .. body[4]
--   prefix  the phase's requestId prefix: call n sends requestId prefix .. n, creditScore
--           600 + n % 100, and its answer must be {decision, requestId} for them
--   out     the file done() writes its JSON summary to
--
-- What wrk's Lua offers and what this script does with it:
--   * request() is not told which connection it writes on. A resent call goes out as the next
--     request written, which with one thread is the connection whose answer was read last
--     (wrk re-arms it for writing right after response()), but nothing here checks that.
--   * wrk times every answer in one histogram (done's latency): it uses gettimeofday and adds
--     synthetic samples for coordinated omission, and cannot tell an OK from a refusal. So each
--     request carries its own JSON-RPC id ("wrk-<k>"), every answer echoes it, and response()
--     finds the request by it: the call it carried and the CLOCK_MONOTONIC time (LuaJIT's FFI)
--     request() built it, a few microseconds before wrk writes it.
--   * done() runs in its own Lua state; thread:get copies only flat tables (nested ones come
--     back empty), so every figure lives in a flat global of the thread.
--   * wrk calls the first thread's request() once before the run, to check what it returns,
--     and never writes that request: setup() marks that thread, and the check gets a request
--     that is neither counted nor timed, and takes no call number.
--   * wrk stops at the end of -d and drops the requests in flight. A phase shorter than a wait
--     would hide it, so done() reports their ages at the last answer read (inFlightUs). That
--     counts every request without an answer: one lost to a transport error, or answered by a
--     page that named no request, counts too (at its age), and cannot be told apart.

local ffi = require("ffi")
ffi.cdef [[
typedef struct { long tv_sec; long tv_nsec; } bench_wrk_timespec;
int clock_gettime(int clock_id, bench_wrk_timespec *tp);
]]
local CLOCK_MONOTONIC = 1
local CAPACITY = "WORKFLOW_CAPACITY_EXHAUSTED"
local APPROVE_AT = 650
local clock = ffi.new("bench_wrk_timespec")

local function now_us()
  ffi.C.clock_gettime(CLOCK_MONOTONIC, clock)
  return tonumber(clock.tv_sec) * 1000000 + math.floor(tonumber(clock.tv_nsec) / 1000)
end

-- setup() and done() run in the main Lua state; each thread runs init/request/response.
local threads = {}

function setup(thread)
  threads[#threads + 1] = thread
  if #threads == 1 then
    thread:set("checked_by_wrk", true)
  end
end

local config, heads, body, prefix, resend
local next_call, next_id = 0, 0
local call_of = {}
-- Refused calls waiting to be sent again (resend): a FIFO of call numbers.
local waiting, first_waiting, last_waiting = {}, 1, 0

-- What done() reads (thread:get copies flat tables only).
outcomes, examples, ok_us, refused_us = {}, {}, {}, {}
sent, answered, resent, unmatched, retry_after = 0, 0, 0, 0, 0
out_path, last_answer_us = nil, 0
-- When each request without an answer yet was built, by JSON-RPC id.
start_of = {}

function init(args)
  config = dofile(args[1])
  heads, body, prefix = config.heads, config.body, config.prefix
  resend = config.policy == "resend"
  assert(resend or config.policy == "fresh", "policy must be resend or fresh")
  out_path = config.out
end

function request()
  if checked_by_wrk then
    checked_by_wrk = false
    return heads[1] .. "Content-Length: 2\r\n\r\n{}"
  end
  local n
  if first_waiting <= last_waiting then
    n = waiting[first_waiting]
    waiting[first_waiting] = nil
    first_waiting = first_waiting + 1
    resent = resent + 1
  else
    n = next_call
    next_call = next_call + 1
  end
  next_id = next_id + 1
  local payload = body[1] .. next_id .. body[2] .. (600 + n % 100) .. body[3] .. prefix .. n
    .. body[4]
  call_of[next_id] = n
  sent = sent + 1
  start_of[next_id] = now_us()
  return heads[n % #heads + 1] .. "Content-Length: " .. #payload .. "\r\n\r\n" .. payload
end

-- The outcome of one answer of call n, as bench.peers.driver.outcome_of names it, and whether
-- it is a refusal (a workflow error code the service answered).
local function classify(status, text, n)
  if status ~= 200 then
    return "HTTP_" .. status
  end
  if not text:find('"result"%s*:') then
    local code = text:match('"error"%s*:%s*{.-"code"%s*:%s*(%-?%d+)')
    return code and ("RPC_" .. code) or "CLIENT_UNREADABLE"
  end
  if text:find('"isError"%s*:%s*true') then
    -- structuredContent.error.code; an isError without one is the peer's exception.
    local code = text:match('"code"%s*:%s*"([%u%d_]+)"')
    if code then
      return code, true
    end
    return "TOOL_ERROR", false
  end
  local decision = text:match('"decision"%s*:%s*"(%a+)"')
  local request_id = text:match('"requestId"%s*:%s*"([^"]*)"')
  local expected = (600 + n % 100) >= APPROVE_AT and "approve" or "decline"
  if decision == expected and request_id == prefix .. n then
    return "OK"
  end
  return "WRONG_OUTPUT"
end

function response(status, headers, text)
  local now = now_us()
  answered = answered + 1
  last_answer_us = now
  local id = tonumber(text:match('"id"%s*:%s*"wrk%-(%d+)"'))
  local n = id and call_of[id]
  local outcome
  if n == nil then
    -- An answer that names no request of ours (an HTTP error page): counted, not timed.
    unmatched = unmatched + 1
    outcome = status ~= 200 and ("HTTP_" .. status) or "CLIENT_UNMATCHED"
  else
    local took = now - start_of[id]
    call_of[id], start_of[id] = nil, nil
    local refused
    outcome, refused = classify(status, text, n)
    if outcome == "OK" then
      ok_us[#ok_us + 1] = took
    elseif refused then
      refused_us[#refused_us + 1] = took
      if text:find('"retryAfterMs"', 1, true) then
        retry_after = retry_after + 1
      end
    end
    if resend and outcome == CAPACITY then
      last_waiting = last_waiting + 1
      waiting[last_waiting] = n
    end
  end
  outcomes[outcome] = (outcomes[outcome] or 0) + 1
  if outcome ~= "OK" and examples[outcome] == nil then
    examples[outcome] = text:sub(1, 300)
  end
end

local function json_string(text)
  local escaped = text:gsub('[%c"\\]', function(char)
    if char == '"' or char == "\\" then
      return "\\" .. char
    end
    return string.format("\\u%04x", char:byte())
  end)
  return '"' .. escaped .. '"'
end

local function json_object(map, encode)
  local parts = {}
  for key, value in pairs(map) do
    parts[#parts + 1] = json_string(key) .. ":" .. encode(value)
  end
  return "{" .. table.concat(parts, ",") .. "}"
end

local function json_integer(value)
  if value ~= value or value == math.huge or value == -math.huge then
    return "null"
  end
  return string.format("%d", math.floor(value + 0.5))
end

local function json_numbers(list)
  local parts = {}
  for index = 1, #list do
    parts[index] = json_integer(list[index])
  end
  return "[" .. table.concat(parts, ",") .. "]"
end

local function append(into, list)
  for index = 1, #list do
    into[#into + 1] = list[index]
  end
end

-- The ages, at a thread's last answer (or now, without one), of its requests still without
-- an answer when wrk stopped.
local function in_flight(thread)
  local last = thread:get("last_answer_us")
  if last == 0 then
    last = now_us()
  end
  local ages = {}
  for _, start in pairs(thread:get("start_of")) do
    ages[#ages + 1] = math.max(0, last - start)
  end
  return ages
end

function done(summary, latency, _)
  local merged = {
    outcomes = {}, examples = {}, ok_us = {}, refused_us = {}, in_flight_us = {},
    sent = 0, answered = 0, resent = 0, unmatched = 0, retry_after = 0,
  }
  local path
  for _, thread in ipairs(threads) do
    path = path or thread:get("out_path")
    for outcome, count in pairs(thread:get("outcomes")) do
      merged.outcomes[outcome] = (merged.outcomes[outcome] or 0) + count
    end
    for outcome, example in pairs(thread:get("examples")) do
      merged.examples[outcome] = merged.examples[outcome] or example
    end
    append(merged.ok_us, thread:get("ok_us"))
    append(merged.refused_us, thread:get("refused_us"))
    append(merged.in_flight_us, in_flight(thread))
    for _, name in ipairs({ "sent", "answered", "resent", "unmatched", "retry_after" }) do
      merged[name] = merged[name] + thread:get(name)
    end
  end
  local errors = summary.errors
  local fields = {
    '"durationUs":' .. summary.duration,
    '"requests":' .. summary.requests,
    '"threads":' .. #threads,
    '"errors":' .. json_object({
      connect = errors.connect, read = errors.read, write = errors.write,
      status = errors.status, timeout = errors.timeout,
    }, tostring),
    '"histogramUs":' .. json_object({
      p50 = latency:percentile(50), p99 = latency:percentile(99), max = latency.max,
      mean = latency.mean,
    }, json_integer),
    '"sent":' .. merged.sent,
    '"answered":' .. merged.answered,
    '"resent":' .. merged.resent,
    '"unmatched":' .. merged.unmatched,
    '"retryAfter":' .. merged.retry_after,
    '"outcomes":' .. json_object(merged.outcomes, tostring),
    '"examples":' .. json_object(merged.examples, json_string),
    '"okUs":' .. json_numbers(merged.ok_us),
    '"refusedUs":' .. json_numbers(merged.refused_us),
    '"inFlightUs":' .. json_numbers(merged.in_flight_us),
  }
  local file = assert(io.open(path, "w"))
  file:write("{" .. table.concat(fields, ",") .. "}\n")
  file:close()
end
