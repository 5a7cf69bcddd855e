-- GCRA steps for a batch of decisions (C9), atomic because Redis runs a
-- script alone, on the Redis server's clock so the instances' clocks do not
-- matter. Each step mirrors `Gcra::spend` in
-- crates/domain/src/rate_limit/gcra.rs, in microseconds.
--
-- The decisions come in groups, one per client key and policy, each group
-- being that client's decisions of the batch in queue order:
--   KEYS[g]      group g's client key
--   ARGV[3g-2]   period: one request's worth of budget comes back this often
--   ARGV[3g-1]   tolerance: how far ahead of now the TAT may be,
--                (limit - 1) periods
--   ARGV[3g]     how many decisions the group holds
-- The decisions of a group are taken one after the other, each seeing the
-- TAT the one before it left (a key in two groups carries its TAT from the
-- first to the second). Since one decision refused leaves the TAT as it is,
-- the ones after it in the group are refused too: the allowed ones are the
-- group's first `allowed`.
-- Returns {start_1, allowed_1, start_2, allowed_2, ...}: per group, the
-- microseconds until the budget was full before its first decision, and how
-- many of its decisions were allowed. Decision j (from 0) was then allowed
-- when j < allowed, the budget full again start + (min(j + 1, allowed))
-- periods later.
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000000 + tonumber(time[2])
local tats = {}     -- each key's TAT as the decisions so far left it
local changed = {}  -- the keys whose TAT a decision moved, written once at the end
local replies = {}
for g, key in ipairs(KEYS) do
  local period = tonumber(ARGV[3 * g - 2])
  local tolerance = tonumber(ARGV[3 * g - 1])
  local count = tonumber(ARGV[3 * g])
  local tat = tats[key]
  if tat == nil then
    tat = tonumber(redis.call('GET', key)) or now
    if tat < now then
      tat = now
    end
  end
  replies[2 * g - 1] = tat - now
  local allowed = 0
  while allowed < count and tat - now <= tolerance do
    tat = tat + period
    allowed = allowed + 1
  end
  if allowed > 0 then
    changed[key] = true
  end
  replies[2 * g] = allowed
  tats[key] = tat
end
-- A key goes when its budget is full again: an idle client costs nothing.
for key in pairs(changed) do
  local tat = tats[key]
  redis.call('SET', key, string.format('%d', tat), 'PX', math.ceil((tat - now) / 1000))
end
return replies
