# Switchyard dark: the release binary (SWITCHYARD_BIN, default target/release/switchyard from the
# project root) with switchyard/config.yaml (conf/examples/peers-bench.yaml, copied there by
# setup.sh) and RUST_LOG=error, so no access line is written. One worker thread, listener 9000.
# Replaces the shared harness's own 50-switchyard.sh: the same endpoints, plus the big bodies.
GW_NAME=switchyard
GW_PORT=9000
GW_HEALTH=/healthz
. "$PEERS/gateways.d/switchyard-endpoints.inc"
gw_start() {
  ( export RUST_LOG=error
    exec_pinned_gw "$SWITCHYARD_BIN" -c "$PEERS/switchyard/config.yaml" ) > "$LOGS/switchyard.log" 2>&1 &
  GW_PID=$!
}
