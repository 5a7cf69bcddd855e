-- 80% GET /items/{id} over ids 1..N, 20% POST /items.
local n, id, k = 100, 0, 0
function init(args) n = tonumber(args[1]) or n end
function request()
  k = k + 1
  if k % 5 == 0 then
    return wrk.format("POST", "/items", { ["Content-Type"] = "application/json" },
                      string.format('{"name":"mixed-%010d"}', k))
  end
  id = id % n + 1
  return wrk.format("GET", "/items/" .. id)
end
