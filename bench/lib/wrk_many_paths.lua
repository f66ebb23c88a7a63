-- Used by bench/shared-store: each request asks the next of /cached/many/0 .. /cached/many/(N-1), N from the
-- environment (BENCH_PATHS), so that a load cycles through more URLs than a small local cache holds; then the
-- summary of wrk_report.lua.
local paths = tonumber(os.getenv("BENCH_PATHS") or "20000")
local counter = 0
request = function()
  counter = counter + 1
  return wrk.format("GET", "/cached/many/" .. (counter % paths))
end
dofile(os.getenv("BENCH_WRK_REPORT"))
