#!/usr/bin/env bash
# The HTTP measure an outside reviewer takes: `vt-agent serve` with no configuration pinned to one
# CPU, a closed-loop client (examples/http_load.rs) with 200 keep-alive connections — each its own
# conversation — on the other, 3 s of warm-up then 20 s timed. Prints the client's JSON line.
#
#   cargo build --release --bin vt-agent --example http_load
#   scripts/bench-http.sh [BIN_DIR (target/release)] [extra http_load options…]
set -euo pipefail
bin_dir=$(realpath "${1:-target/release}")
shift || true
data=$(mktemp -d)
# A build older than step 31 counted every open-mode request against one rate: lift it for them.
[ -n "${VT_BENCH_OLD_RATE:-}" ] && printf '[http]\nrate_per_minute = 100000000\n' > "$data/vt-agent.toml"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
( cd "$data" && exec taskset -c 0 "$bin_dir/vt-agent" serve --addr "127.0.0.1:$port" ) \
    >"$data/serve.log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null; rm -rf "$data"' EXIT
for _ in $(seq 100); do
    curl -sf "http://127.0.0.1:$port/healthz" >/dev/null 2>&1 && break
    sleep 0.1
done
curl -sf "http://127.0.0.1:$port/healthz" >/dev/null || { cat "$data/serve.log" >&2; exit 2; }
taskset -c 1 "$bin_dir/examples/http_load" --addr "127.0.0.1:$port" --pid "$server" "$@"
