-- wrk script for seed 000's "random load": every request asks for a random file of the cold set,
-- /cold/N.bin with N in [0, FILES), so most requests miss the page cache and read the disk.
-- Usage: wrk -t1 -c40 -d13s -s bench/seed000/random.lua http://127.0.0.1:PORT/ [FILES]

local files = 192

init = function(args)
   if args[1] and tonumber(args[1]) then files = tonumber(args[1]) end
   -- A different sequence per run (each wrk thread has its own Lua state and clock reading).
   math.randomseed(os.time() + math.floor(os.clock() * 1e6))
end

request = function()
   return wrk.format("GET", "/cold/" .. math.random(0, files - 1) .. ".bin")
end
