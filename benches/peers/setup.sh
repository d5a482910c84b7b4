#!/usr/bin/env bash
# Prepares a writable copy of the peer harness (../shared/bench/peers/, copied to PEERS_DIR) for
# Switchyard's rows: copies this folder's gateway scripts into its gateways.d/ and the two configs
# from conf/examples/ into its switchyard/, and adds the two big-body endpoints the shared harness
# does not have (issue 46 item 3), beside its rerank, speech and image:
#
#   rerank_100     Cohere v2 rerank, 100 documents of about 270 characters (27 KB of request), the
#                  fake answering 100 results (POST /big/v2/rerank)
#   image_b64_big  a GPT image model asked for response_format b64_json, the fake answering OpenAI's
#                  JSON with one image inline (1,572,864 characters of base64: 1.57 MB of answer;
#                  POST /big/v1/images/generations)
#
# The additions are made by big_bodies.py: static answers in fake/static/, two routes in
# fake/nginx.conf, and two cases each in run-peers.sh's make_body and verify. Every edit is checked
# against the text it expects and the script stops, changing nothing, when the harness is not the
# one it knows. Running it again on a prepared copy changes nothing.
#
# Usage (from the project root): cp -r ../shared/bench/peers /tmp/peers && benches/peers/setup.sh /tmp/peers
set -euo pipefail
PEERS_DIR=${1:?usage: benches/peers/setup.sh PEERS_DIR}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
[ -f "$PEERS_DIR/run-peers.sh" ] || { echo "setup.sh: $PEERS_DIR has no run-peers.sh" >&2; exit 1; }
python3 "$HERE/big_bodies.py" "$PEERS_DIR"
cp "$HERE"/gateways.d/*.sh "$HERE"/gateways.d/*.inc "$PEERS_DIR/gateways.d/"
cp "$ROOT/conf/examples/peers-bench.yaml" "$PEERS_DIR/switchyard/config.yaml"
cp "$ROOT/conf/examples/peers-bench-ops.yaml" "$PEERS_DIR/switchyard/config-ops.yaml"
echo "setup.sh: $PEERS_DIR is ready (ENDPOINTS may name rerank_100 and image_b64_big)"
