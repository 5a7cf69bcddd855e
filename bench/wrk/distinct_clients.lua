-- GET / with a client address (X-Forwarded-For) no earlier request had:
-- thread k writes 1(0+k).x.y.z, counting up (wrk's LuaJIT has no integer
-- division).
local threads = 0
function setup(thread)
  thread:set("prefix", 10 + threads)
  threads = threads + 1
end
local counter = 0
function request()
  counter = counter + 1
  local address = string.format("%d.%d.%d.%d", prefix, math.floor(counter / 65536) % 256,
    math.floor(counter / 256) % 256, counter % 256)
  return wrk.format("GET", "/", { ["X-Forwarded-For"] = address })
end
