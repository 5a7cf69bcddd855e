-- PUT /items/{id} over ids 1..N, each request far from the last (a stride
-- of 7919, a prime, so every id comes up once per N requests): writes that
-- land in a different part of the collection each time.
local n, k = 100, 0
function init(args) n = tonumber(args[1]) or n end
function request()
  k = k + 1
  local id = (k * 7919) % n + 1
  return wrk.format("PUT", "/items/" .. id, { ["Content-Type"] = "application/json" },
                    string.format('{"name":"renamed-%09d"}', id))
end
