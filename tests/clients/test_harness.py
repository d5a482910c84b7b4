"""The harness itself: the gateway starts from a generated config and serves the built-in reranker."""

import json
import urllib.request

from conftest import API_KEY


def test_local_reranker_answers(gateway):
    gw = gateway()
    req = urllib.request.Request(
        gw.base + "/rerank",
        data=json.dumps({"model": "local-bm25", "query": "capital of France",
                         "documents": ["Paris is the capital of France", "Berlin is in Germany"]}).encode(),
        headers={"Content-Type": "application/json", "Service-API-Key": API_KEY},
    )
    with urllib.request.urlopen(req, timeout=10) as r:
        body = json.loads(r.read())
    assert r.status == 200
    assert body["results"][0]["index"] == 0
