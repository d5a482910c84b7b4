# Switchyard as operators run it, approximate limits: 55-switchyard-ops.sh's config with
# `auth.limits_mode: approximate`, so the limits are decided from the instance's own counts and
# reconciled with Redis every 50 ms off the requests' path (docs/guide/limits.md). Needs the same Redis.
GW_NAME=switchyard-approx
GW_PORT=9000
GW_HEALTH=/healthz
SWITCHYARD_BIN=${SWITCHYARD_BIN:-$PWD/target/release/switchyard}
gw_start() {
  ( export RUST_LOG=info SWITCHYARD_BENCH_LIMITS_MODE=approximate
    exec_pinned_gw "$SWITCHYARD_BIN" -c "$PEERS/switchyard/config-ops.yaml" ) > "$LOGS/switchyard-approx.log" 2>&1 &
  GW_PID=$!
}
. "$PEERS/gateways.d/switchyard-endpoints.inc"
