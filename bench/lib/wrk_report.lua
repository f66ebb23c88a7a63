-- Used by bench/run and bench/tls: at the end of a wrk run, prints one line "BENCH_JSON {...}" with the
-- request count, duration, errors (socket connect/read/write/timeout, and "status": responses with a
-- status >= 400) and latency percentiles, mean and standard deviation in microseconds.
done = function(summary, latency, requests)
  local e = summary.errors
  local p = function(q) if summary.requests > 0 then return latency:percentile(q) else return 0 end end
  local mean, stdev = 0, 0
  if summary.requests > 0 then mean, stdev = latency.mean, latency.stdev end
  io.write(string.format(
    'BENCH_JSON {"requests":%d,"duration_us":%d,"bytes":%d,"connect":%d,"read":%d,"write":%d,' ..
    '"status":%d,"timeout":%d,"p50_us":%d,"p75_us":%d,"p90_us":%d,"p99_us":%d,"max_us":%d,"mean_us":%.1f,"stdev_us":%.1f}\n',
    summary.requests, summary.duration, summary.bytes, e.connect, e.read, e.write, e.status, e.timeout,
    p(50), p(75), p(90), p(99), latency.max, mean, stdev))
end
