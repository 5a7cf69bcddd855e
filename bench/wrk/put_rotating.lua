-- PUT /items/{id} over ids 1..N.
local n, id = 100, 0
function init(args) n = tonumber(args[1]) or n end
function request()
  id = id % n + 1
  return wrk.format("PUT", "/items/" .. id, { ["Content-Type"] = "application/json" },
                    string.format('{"name":"renamed-%09d"}', id))
end
