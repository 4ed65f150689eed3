-- wrk script: HTTP/1.1 pipelining. Every write carries DEPTH requests (default 16) for "/",
-- built once in init() by concatenating wrk.format() requests; wrk counts each response.
-- Usage: wrk -t1 -c100 -d10s -s bench/pipeline16.lua http://127.0.0.1:PORT/ [DEPTH]

local batch

init = function(args)
   local depth = 16
   for _, a in ipairs(args) do
      if tonumber(a) then depth = tonumber(a) end
   end
   local reqs = {}
   for i = 1, depth do
      reqs[i] = wrk.format("GET", "/")
   end
   batch = table.concat(reqs)
end

request = function()
   return batch
end
