-- GCRA steps for a batch of decisions (C9), atomic because Redis runs a
-- script alone, on the Redis server's clock so the instances' clocks do not
-- matter. Each step mirrors `Gcra::spend` in
-- crates/domain/src/rate_limit/gcra.rs, in microseconds.
--   KEYS[i]      the i-th decision's client key; the same key may come
--                several times, and its decisions are then taken in order,
--                each seeing the TAT the one before it left
--   ARGV[2i-1]   period of decision i: one request's worth of budget comes
--                back this often
--   ARGV[2i]     tolerance of decision i: how far ahead of now the TAT may
--                be, (limit - 1) periods
-- Returns {allowed_1 (1 or 0), microseconds until the budget is full again_1,
--          allowed_2, ...}: two numbers per decision, in the order of KEYS.
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000000 + tonumber(time[2])
local tats = {}     -- each key's TAT as the decisions so far left it
local changed = {}  -- the keys whose TAT a decision moved, written once at the end
local replies = {}
for i, key in ipairs(KEYS) do
  local period = tonumber(ARGV[2 * i - 1])
  local tolerance = tonumber(ARGV[2 * i])
  local tat = tats[key]
  if tat == nil then
    tat = tonumber(redis.call('GET', key)) or now
    if tat < now then
      tat = now
    end
  end
  if tat - now > tolerance then
    replies[2 * i - 1] = 0
  else
    tat = tat + period
    changed[key] = true
    replies[2 * i - 1] = 1
  end
  replies[2 * i] = tat - now
  tats[key] = tat
end
-- A key goes when its budget is full again: an idle client costs nothing.
for key in pairs(changed) do
  local tat = tats[key]
  redis.call('SET', key, string.format('%d', tat), 'PX', math.ceil((tat - now) / 1000))
end
return replies
