-- POST /items with a 16-character name. With a limit (first argument), the
-- thread stops once that many responses arrived (used to preload a store);
-- `stop` works from `response`, not from `request`.
local limit, sent, received = nil, 0, 0
function init(args) limit = tonumber(args[1]) end
function request()
  sent = sent + 1
  return wrk.format("POST", "/items", { ["Content-Type"] = "application/json" },
                    string.format('{"name":"item-%011d"}', sent))
end
function response()
  received = received + 1
  if limit and received >= limit then wrk.thread:stop() end
end
