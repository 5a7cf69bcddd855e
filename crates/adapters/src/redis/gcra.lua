-- One GCRA step (C9), atomic because Redis runs a script alone, on the
-- Redis server's clock so the instances' clocks do not matter. It mirrors
-- `Gcra::spend` in crates/domain/src/rate_limit.rs, in microseconds.
--   KEYS[1]  the client's key
--   ARGV[1]  period: one request's worth of budget comes back this often
--   ARGV[2]  tolerance: how far ahead of now the TAT may be, (limit - 1) periods
-- Returns {allowed (1 or 0), microseconds until the budget is full again}.
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000000 + tonumber(time[2])
local period = tonumber(ARGV[1])
local tolerance = tonumber(ARGV[2])
local tat = tonumber(redis.call('GET', KEYS[1])) or now
if tat < now then
  tat = now
end
if tat - now > tolerance then
  return {0, tat - now}
end
local next = tat + period
-- The key goes when the budget is full again: an idle client costs nothing.
redis.call('SET', KEYS[1], string.format('%d', next), 'PX', math.ceil((next - now) / 1000))
return {1, next - now}
