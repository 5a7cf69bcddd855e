-- GET /items/{id} with ids drawn at random from 1..N (N is the first script
-- argument). The seed is fixed, so every run sends the same sequence:
-- servers compared get the same requests.
local n = 100
function init(args) n = tonumber(args[1]) or n; math.randomseed(1) end
function request()
  return wrk.format("GET", "/items/" .. math.random(n))
end
