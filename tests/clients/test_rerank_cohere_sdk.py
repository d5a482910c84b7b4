"""Cohere's Python SDK against the gateway: `ClientV2.rerank` and the v1 `Client.rerank`, given
only `base_url=<gateway>/compat/cohere` and a gateway API key."""

import cohere
import pytest
from cohere.errors import BadRequestError, UnauthorizedError

from conftest import API_KEY
from rerank_support import DOCS, MODEL, ORDER, QUERY, SCORES, gw, sent  # noqa: F401 (fixture)


def test_client_v2_rerank(gw, fake):
    co = cohere.ClientV2(api_key=API_KEY, base_url=gw.url + "/compat/cohere")
    resp = co.rerank(model=MODEL, query=QUERY, documents=DOCS, top_n=3)
    assert [r.index for r in resp.results] == ORDER[:3]
    assert [r.relevance_score for r in resp.results] == pytest.approx([SCORES[i] for i in ORDER[:3]])
    assert resp.meta.api_version.version == "2"
    assert resp.meta.billed_units.search_units == 1
    assert resp.meta.tokens.input_tokens > 0
    assert resp.id
    # The provider got the gateway's own request (the caller's key never travels on).
    assert sent(fake) == {"model": MODEL, "query": QUERY, "documents": DOCS, "top_n": 3}
    assert fake.requests[0].headers["authorization"] == "Bearer sk-fake"


def test_client_v2_top_n_above_the_document_count(gw):
    co = cohere.ClientV2(api_key=API_KEY, base_url=gw.url + "/compat/cohere")
    resp = co.rerank(model="local-bm25", query=QUERY, documents=DOCS[:2], top_n=10)
    assert [r.index for r in resp.results] == [1, 0]


def test_client_v1_rerank_with_and_without_documents(gw, fake):
    co = cohere.Client(api_key=API_KEY, base_url=gw.url + "/compat/cohere")
    resp = co.rerank(model=MODEL, query=QUERY, documents=DOCS, top_n=2, return_documents=True)
    assert [r.index for r in resp.results] == ORDER[:2]
    assert [r.document.text for r in resp.results] == [DOCS[i] for i in ORDER[:2]]
    assert resp.meta.api_version.version == "1"

    resp = co.rerank(model=MODEL, query=QUERY, documents=DOCS, top_n=2)
    assert [r.index for r in resp.results] == ORDER[:2]
    assert all(r.document is None for r in resp.results)

    # v1 also takes documents as objects, ranked by their `text` and returned whole.
    objs = [{"text": d, "source": f"doc-{i}"} for i, d in enumerate(DOCS)]
    resp = co.rerank(model=MODEL, query=QUERY, documents=objs, return_documents=True)
    assert [r.index for r in resp.results] == ORDER
    assert resp.results[0].document.text == DOCS[1]
    assert resp.results[0].document.source == "doc-1"


def test_typed_errors(gw):
    co = cohere.ClientV2(api_key=API_KEY, base_url=gw.url + "/compat/cohere")
    with pytest.raises(BadRequestError) as e:
        co.rerank(model="no-such-model", query=QUERY, documents=DOCS)
    assert e.value.status_code == 400
    assert "unknown model `no-such-model`" in e.value.body["message"]

    with pytest.raises(BadRequestError) as e:
        cohere.Client(api_key=API_KEY, base_url=gw.url + "/compat/cohere").rerank(
            model="local-bm25", query=QUERY, documents=DOCS, top_n=0
        )
    assert "top_n: must be at least 1" in e.value.body["message"]

    bad = cohere.ClientV2(api_key="not-a-gateway-key", base_url=gw.url + "/compat/cohere")
    with pytest.raises(UnauthorizedError):
        bad.rerank(model=MODEL, query=QUERY, documents=DOCS)
