# Switchyard as operators run it, approximate limits: 55-switchyard-ops.sh's config with
# `auth.limits_mode: approximate`, so the limits are decided from the instance's own counts and
# reconciled with Redis every 50 ms off the requests' path (docs/guide/limits.md). Needs the same Redis.
GW_NAME=switchyard-approx
GW_PORT=9000
GW_HEALTH=/healthz
. "$PEERS/gateways.d/switchyard-endpoints.inc"
gw_start() { switchyard_ops_start approximate; }
