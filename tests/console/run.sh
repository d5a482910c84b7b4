#!/usr/bin/env bash
# The web console's browser test: Debian's Chromium (never a downloaded browser), driven by
# playwright-core (pinned in package-lock.json, installed with `npm ci` into
# tests/console/node_modules), against the real gateway binary with a config of its own: a main
# listener, the management listener with an admin key, the ledger and the tenants in a PostgreSQL
# schema of its own (dropped at the end), and the built-in `local-bm25` rerank model (no provider
# to fake). Screenshots of each view go to target/console-screenshots/.
# Usage: bash tests/console/run.sh [node --test args]
#   SWITCHYARD_BIN: the binary (default target/debug/switchyard, built first);
#   SWITCHYARD_TEST_POSTGRES_URL: the database (default as in scripts/test).
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
source scripts/deps.sh
need_chromium
command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 ||
  { echo "console test: needs Node.js (20 or later) and npm" >&2; exit 1; }

dir=tests/console
want=$(sha256sum "$dir/package-lock.json" | cut -d' ' -f1)
if [ ! -d "$dir/node_modules/playwright-core" ] ||
  [ "$(cat "$dir/node_modules/.lock.sha256" 2>/dev/null)" != "$want" ]; then
  echo "console test: npm ci (playwright-core, no browser download)"
  (cd "$dir" && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund --ignore-scripts --loglevel=error)
  echo "$want" > "$dir/node_modules/.lock.sha256"
fi

# The console's files are built into the binary: an old binary would test old files, so it is
# brought up to date (a no-op when it is) unless SWITCHYARD_BIN names one.
if [ -n "${SWITCHYARD_BIN:-}" ]; then
  bin=$SWITCHYARD_BIN
else
  cargo build --bin switchyard
  bin=$root/target/debug/switchyard
fi

pg_url="${SWITCHYARD_TEST_POSTGRES_URL:-postgresql://postgres:postgres@127.0.0.1:5432/postgres}"
schema="console_test_$(date +%s)_$$"
work="$root/target/console-test"
shots="$root/target/console-screenshots"
rm -rf "$work" "$shots"
mkdir -p "$work" "$shots"
free_port() { node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'; }
api_port=$(free_port)
admin_port=$(free_port)
while [ "$admin_port" = "$api_port" ]; do admin_port=$(free_port); done
admin_name=console-test
admin_key="adm_$(node -e 'console.log(require("crypto").randomBytes(24).toString("base64url"))')"
caller_key="yaml_$(node -e 'console.log(require("crypto").randomBytes(24).toString("base64url"))')"

psql "$pg_url" -qc "CREATE SCHEMA $schema" >/dev/null
gateway_pid=
cleanup() {
  local status=$?
  if [ -n "$gateway_pid" ]; then
    kill "$gateway_pid" 2>/dev/null || true
    wait "$gateway_pid" 2>/dev/null || true
  fi
  psql "$pg_url" -qc "DROP SCHEMA IF EXISTS $schema CASCADE" >/dev/null 2>&1 || true
  if [ "$status" -ne 0 ]; then
    echo "console test failed; the gateway's log, $work/gateway.log, ends:" >&2
    tail -40 "$work/gateway.log" >&2 || true
  fi
}
trap cleanup EXIT

# local-bm25 gets a price (one dollar per thousand queries) so its ledger rows carry a cost.
cat > "$work/switchyard.yaml" <<YAML
version: 1
threads: 2
pid_file: $work/switchyard.pid
upgrade_sock: $work/switchyard.sock
grace_period_seconds: 0
graceful_shutdown_timeout_seconds: 1
switchyard:
  listeners:
    - {name: main, address: "127.0.0.1:$api_port"}
  auth:
    api_keys:
      - {name: yaml-caller, key: "$caller_key"}
  ledger:
    database_url: "$pg_url"
    schema: $schema
    flush_interval_ms: 100
  tenants:
    refresh_seconds: 30
  admin:
    address: "127.0.0.1:$admin_port"
    keys:
      - {name: "$admin_name", key: "$admin_key"}
  providers:
    builtin: {kind: local}
  models:
    local-bm25:
      family: local-rerank
      price: {currency: USD, queries: {price: 1, per: 1000, documents: 100}}
      targets: [{provider: builtin, model: bm25}]
YAML

"$bin" -c "$work/switchyard.yaml" >"$work/gateway.log" 2>&1 &
gateway_pid=$!

export CONSOLE_TEST_API="http://127.0.0.1:$api_port"
export CONSOLE_TEST_ADMIN="http://127.0.0.1:$admin_port"
export CONSOLE_TEST_ADMIN_KEY="$admin_key"
export CONSOLE_TEST_ADMIN_NAME="$admin_name"
export CONSOLE_TEST_CALLER_KEY="$caller_key"
export CONSOLE_TEST_PG_URL="$pg_url"
export CONSOLE_TEST_SCHEMA="$schema"
export CONSOLE_TEST_GATEWAY_PID="$gateway_pid"
export CONSOLE_TEST_SCREENSHOTS="$shots"
node --test --test-concurrency=1 "$@" "$dir"/*.test.mjs
