#!/usr/bin/env bash
# The yardstick: BullMQ 6.7 + a local redis-server (AOF, appendfsync everysec: a crash can lose
# the last second of acknowledged jobs), on 127.0.0.1 only, measured on this machine now.
# Run it just before `npm run bench -- --peer=FILE`, and compare ratios, never absolute figures
# from another day: a shared machine is noisy.
#
#   scripts/peer-bench/run.sh > peer.json              # c=8 only (about 40 s)
#   CONCURRENCY=1,8,32 scripts/peer-bench/run.sh       # more worker concurrencies
#   scripts/peer-bench/run.sh serve                    # one figure a line on stdin, answered on stdout
#                                                      # (peer-bullmq.mjs --serve; npm run bench -- --peer=live)
#
# Needs: apt-get install -y redis-server. Installs its own node_modules (npm ci) on first use.
# Prints a small table on stderr and one JSON line on stdout (jobs/s per concurrency, pickup
# latency). Stops the redis-server it started, by PID.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
command -v redis-server >/dev/null || { echo "redis-server missing: apt-get install -y redis-server" >&2; exit 1; }
# Installs and runs from a writable copy outside the repository (kept between runs), so its
# node_modules stay out of the project's.
WORK=${PEER_BENCH_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/leasehold-peer-bench}
mkdir -p "$WORK"
for f in package.json package-lock.json peer-bullmq.mjs; do cmp -s "$HERE/$f" "$WORK/$f" || cp "$HERE/$f" "$WORK/$f"; done
cd "$WORK"
[ -d node_modules ] && cmp -s package-lock.json node_modules/.peer-bench-lock || {
  npm ci --no-audit --no-fund >&2 && cp package-lock.json node_modules/.peer-bench-lock; }
PORT=$(node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')
DATA=$(mktemp -d)
redis-server --bind 127.0.0.1 --port "$PORT" --protected-mode yes --dir "$DATA" --logfile "$DATA/redis.log" \
  --save "" --appendonly yes --appendfsync everysec &
RPID=$!
trap 'kill "$RPID" 2>/dev/null; wait "$RPID" 2>/dev/null; rm -rf "$DATA"' EXIT
for _ in $(seq 50); do (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && break; sleep 0.1; done
if [ "${1:-}" = serve ]; then
  REDIS_PORT=$PORT REDIS_LABEL=aof-everysec BULL_SINGLE=${BULL_SINGLE:-2000} node peer-bullmq.mjs --serve
  exit
fi
out=$(REDIS_PORT=$PORT REDIS_LABEL=aof-everysec CONCURRENCY=${CONCURRENCY:-8} BULL_SINGLE=${BULL_SINGLE:-2000} \
  node peer-bullmq.mjs 2>/dev/null | tail -n 1)
echo "$out"
echo "$out" | node -e '
  const r = JSON.parse(require("fs").readFileSync(0, "utf8"))
  const p = (x) => process.stderr.write(x + "\n")
  p(`BullMQ ${r.bullmq} on redis ${r.redis} (AOF everysec), node ${r.node}`)
  for (const x of r.processing) p(`  process c=${x.concurrency}: ${Math.round(x.jobs_per_s)} jobs/s (${x.jobs} jobs, add → last completed)`)
  if (r.processing_single) p(`  single adds from ${r.processing_single.producers} producers, processed c=${r.processing_single.concurrency}: ${r.processing_single.jobs_per_s} jobs/s (${r.processing_single.jobs} jobs)`)
  if (r.processing_single_one) p(`  single adds from one producer, processed c=${r.processing_single_one.concurrency}: ${r.processing_single_one.jobs_per_s} jobs/s (${r.processing_single_one.jobs} jobs)`)
  for (const x of r.latency) p(`  pickup c=${x.concurrency}: p50 ${x.pickup_ms.p50} ms, p99 ${x.pickup_ms.p99} ms`)
  if (r.pickup_one_at_a_time) p(`  pickup one at a time (${r.pickup_one_at_a_time.gap_ms} ms idle before each): p50 ${r.pickup_one_at_a_time.pickup_ms.p50} ms`)
  p(`  addBulk ${Math.round(r.enqueue.addBulk.jobs_per_s)} jobs/s, add ${Math.round(r.enqueue.add.jobs_per_s)} jobs/s`)
'
