# Switchyard as operators run it, exact limits: the JSON access line at info, metrics on their own
# listener, a limit on every meter of the bench's key counted in Redis with one round trip per request
# (switchyard/config-ops.yaml: conf/examples/peers-bench-ops.yaml, copied there by setup.sh). Needs a
# Redis at SWITCHYARD_BENCH_REDIS_URL (default redis://127.0.0.1:6379); flush it between runs. Same
# port and requests as 50-switchyard.sh, so the rows compare.
GW_NAME=switchyard-ops
GW_PORT=9000
GW_HEALTH=/healthz
. "$PEERS/gateways.d/switchyard-endpoints.inc"
gw_start() { switchyard_ops_start exact; }
