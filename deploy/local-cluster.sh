#!/usr/bin/env bash
# A try-out of several tito-server instances behind nginx on this machine (docs/scaling.md):
# one simulated engine, N instances (each with its own data directory and 1 worker), and
# nginx hashing session ids onto them. Ctrl-C stops everything it started.
#
#   deploy/local-cluster.sh [N=2] [BALANCER_PORT=8080]
#
# Then create sessions with PUT (a client-chosen id), e.g.
#   curl -X PUT localhost:8080/sessions/agent-1
#   curl localhost:8080/sessions/agent-1/v1/chat/completions -H 'content-type: application/json' \
#        -d '{"model":"m","messages":[{"role":"user","content":"hi"}]}'
# Every response carries x-tito-instance: the instance that holds the session.
set -euo pipefail
cd "$(dirname "$0")/.."

N="${1:-2}"
PORT="${2:-8080}"
ENGINE_PORT=$((PORT + 100))
command -v nginx >/dev/null || { echo "nginx not found: apt-get install nginx (Debian) or brew install nginx" >&2; exit 2; }
[ -d dist ] || npm run build

WORK="$(mktemp -d "${TMPDIR:-/tmp}/tito-cluster-XXXXXX")"
chmod 755 "$WORK"
PIDS=()
# Stops a process and everything it started (npx and tsx start children of their own).
killtree() {
  local child
  for child in $(pgrep -P "$1" 2>/dev/null); do killtree "$child"; done
  kill "$1" 2>/dev/null || true
}
cleanup() {
  trap - EXIT INT TERM
  for pid in "${PIDS[@]}"; do killtree "$pid"; done
  wait 2>/dev/null || true
  echo "stopped; logs and data are in $WORK"
}
trap cleanup EXIT INT TERM

node_modules/.bin/tsx server/sim-engine/engine-main.ts --port "$ENGINE_PORT" >"$WORK/engine.log" 2>&1 &
PIDS+=($!)
until curl -sf "http://127.0.0.1:$ENGINE_PORT/health" >/dev/null; do sleep 0.2; done

SERVERS=""
for i in $(seq 1 "$N"); do
  port=$((PORT + i))
  node bin/tito-server.js serve --port "$port" --workers 1 --engine "http://127.0.0.1:$ENGINE_PORT" \
    --data-dir "$WORK/instance-$i" >"$WORK/instance-$i.log" 2>&1 &
  PIDS+=($!)
  SERVERS="${SERVERS}server 127.0.0.1:${port} max_fails=0; "
done

sed -e "s#{{PREFIX}}#$WORK#g" -e "s#{{LISTEN}}#127.0.0.1:$PORT#g" -e "s#{{SERVERS}}#$SERVERS#g" \
  deploy/nginx.conf.template >"$WORK/nginx.conf"
for i in $(seq 1 "$N"); do
  until curl -sf "http://127.0.0.1:$((PORT + i))/health" >/dev/null; do sleep 0.2; done
done
nginx -p "$WORK" -c "$WORK/nginx.conf" &
PIDS+=($!)
echo "balancer on http://127.0.0.1:$PORT over $N instances (ports $((PORT + 1))-$((PORT + N))); work dir $WORK"
wait
