-- GET /items/{id} over ids 1..N (N is the first script argument).
local n, id = 100, 0
function init(args) n = tonumber(args[1]) or n; id = math.random(n) end
function request()
  id = id % n + 1
  return wrk.format("GET", "/items/" .. id)
end
