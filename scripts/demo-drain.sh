#!/usr/bin/env bash
# A graceful drain, step by step, on 127.0.0.1: the bundled legacy demo server, one gateway
# (`mrtr-gateway serve`), a call held for the user's answer, SIGTERM, and then:
# /readyz says 503, a new call is refused with a retryable 503, the held call's retry still
# completes, and the process exits on its own well before listen.drain_timeout.
#
#   bash scripts/demo-drain.sh          (needs .venv: bash scripts/bootstrap.sh; curl and jq)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
work="$(mktemp -d)"
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

free_port() { "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
step() { printf '\n== %s\n' "$*"; }
wait_for() { # URL: until it answers 200, at most 30 s
  for _ in $(seq 300); do curl -fsS -o /dev/null "$1" 2>/dev/null && return 0; sleep 0.1; done
  echo "no answer from $1" >&2; exit 1
}

BACKEND_PORT="$(free_port)"
GATEWAY_PORT="$(free_port)"
GW="http://127.0.0.1:$GATEWAY_PORT"
DRAIN_TIMEOUT=30

step "legacy demo server on :$BACKEND_PORT"
"$PY" -m gateway.demo.backend --port "$BACKEND_PORT" >"$work/backend.log" 2>&1 &
pids+=($!)

step "gateway on :$GATEWAY_PORT, listen.drain_timeout: $DRAIN_TIMEOUT"
cat >"$work/gateway.yaml" <<EOF
state:
  keys: ["$("$PY" -m gateway gen-key)"]
listen: {host: 127.0.0.1, port: $GATEWAY_PORT, drain_timeout: $DRAIN_TIMEOUT}
logging: {json: true}
routes:
  - name: demo
    path: /mcp
    backend: {url: "http://127.0.0.1:$BACKEND_PORT/mcp"}
EOF
"$PY" -m gateway serve --config "$work/gateway.yaml" 2>"$work/gateway.log" &
GATEWAY_PID=$!
pids+=("$GATEWAY_PID")
wait_for "$GW/readyz"
echo "GET /readyz -> $(curl -s -w ' %{http_code}' "$GW/readyz")"

call() { # METHOD-PARAMS-JSON: POST one 2026-07-28 tools/call; prints status, Retry-After and body
  curl -s -D "$work/headers" -o "$work/body" -w '%{http_code}' "$GW/mcp" \
    -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \
    -H 'MCP-Protocol-Version: 2026-07-28' -H 'Mcp-Method: tools/call' -H "Mcp-Name: $2" \
    --data "{\"jsonrpc\":\"2.0\",\"id\":$1,\"method\":\"tools/call\",\"params\":$3}"
}
meta='"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{"form":{}}}}'

step "a call that asks the user (ask_city): held on this replica"
status="$(call 1 ask_city "{\"name\":\"ask_city\",\"arguments\":{},$meta}")"
echo "POST tools/call ask_city -> $status $(jq -c '{resultType: .result.resultType, inputRequests: (.result.inputRequests | keys)}' "$work/body")"
state="$(jq -r .result.requestState "$work/body")"
key="$(jq -r '.result.inputRequests | keys[0]' "$work/body")"

step "SIGTERM to the gateway (pid $GATEWAY_PID): the drain begins"
kill -TERM "$GATEWAY_PID"
started=$(date +%s.%N)
for _ in $(seq 100); do [[ "$(curl -s -o /dev/null -w '%{http_code}' "$GW/readyz")" == 503 ]] && break; sleep 0.05; done
echo "GET /readyz -> $(curl -s -w ' %{http_code}' "$GW/readyz")"

step "a new call reaches the draining replica: refused, retryable"
status="$(call 2 ask_city "{\"name\":\"ask_city\",\"arguments\":{},$meta}")"
echo "POST tools/call ask_city -> $status, $(grep -i '^retry-after' "$work/headers" | tr -d '\r'), $(jq -c .error "$work/body")"

step "the user answers: the held call's retry is still served"
answer="{\"$key\":{\"action\":\"accept\",\"content\":{\"city\":\"Oslo\"}}}"
status="$(call 3 ask_city "{\"name\":\"ask_city\",\"arguments\":{},\"inputResponses\":$answer,\"requestState\":\"$state\",$meta}")"
echo "POST tools/call ask_city (retry) -> $status $(jq -c '{resultType: .result.resultType, text: .result.content[0].text}' "$work/body")"

step "nothing is held any more: the process exits without waiting for the drain timeout"
rc=0
wait "$GATEWAY_PID" || rc=$?
elapsed=$("$PY" -c "print(f'{$(date +%s.%N) - $started:.1f}')")
echo "gateway exited with status $rc, ${elapsed}s after SIGTERM (drain_timeout ${DRAIN_TIMEOUT}s)"

step "the gateway's drain log lines"
jq -c 'select(.event | test("^drain_|^listening")) | {event, holds, in_flight, drained, timeout_s} | with_entries(select(.value != null))' "$work/gateway.log"
