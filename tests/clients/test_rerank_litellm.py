"""LiteLLM's `rerank()` against the gateway. `cohere/` models: `api_base=<gateway>/compat/cohere`
(LiteLLM appends `/v2/rerank`; an `api_base` ending in `/v1/rerank` picks Cohere v1). `jina_ai/`
models: `api_base=<gateway>` (LiteLLM keeps only its scheme and host and posts to `/v1/rerank`)."""

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no network at import

import litellm  # noqa: E402
import pytest  # noqa: E402

from conftest import API_KEY  # noqa: E402
from rerank_support import DOCS, MODEL, ORDER, QUERY, SCORES, gw, sent  # noqa: E402,F401 (fixture)


def test_cohere_v2(gw, fake):
    resp = litellm.rerank(model=f"cohere/{MODEL}", query=QUERY, documents=DOCS, top_n=3,
                          api_base=gw.url + "/compat/cohere", api_key=API_KEY)
    assert [r["index"] for r in resp.results] == ORDER[:3]
    assert [r["relevance_score"] for r in resp.results] == pytest.approx([SCORES[i] for i in ORDER[:3]])
    # LiteLLM sends return_documents: true and reads `document` as {"text": ...}.
    assert [r["document"]["text"] for r in resp.results] == [DOCS[i] for i in ORDER[:3]]
    assert resp.meta["billed_units"]["search_units"] == 1
    assert resp.meta["api_version"]["version"] == "2"
    assert fake.requests[0].path == "/v2/rerank"
    assert "return_documents" not in sent(fake)


def test_cohere_v1(gw):
    resp = litellm.rerank(model="cohere/local-bm25", query=QUERY, documents=DOCS, top_n=10,
                          api_base=gw.url + "/compat/cohere/v1/rerank", api_key=API_KEY)
    assert [r["index"] for r in resp.results][:2] == [1, 0]
    assert len(resp.results) == len(DOCS)
    assert resp.results[0]["document"]["text"] == DOCS[1]
    assert resp.meta["api_version"]["version"] == "1"


def test_jina_ai(gw, fake):
    resp = litellm.rerank(model=f"jina_ai/{MODEL}", query=QUERY, documents=DOCS, top_n=2,
                          api_base=gw.url, api_key=API_KEY)
    assert [r["index"] for r in resp.results] == ORDER[:2]
    assert [r["relevance_score"] for r in resp.results] == pytest.approx([SCORES[i] for i in ORDER[:2]])
    assert [r["document"]["text"] for r in resp.results] == [DOCS[i] for i in ORDER[:2]]
    assert resp.meta["billed_units"]["total_tokens"] > 0
    assert sent(fake)["top_n"] == 2


def test_typed_errors(gw):
    with pytest.raises(litellm.BadRequestError):
        litellm.rerank(model="cohere/no-such-model", query=QUERY, documents=DOCS,
                       api_base=gw.url + "/compat/cohere", api_key=API_KEY)
    with pytest.raises(litellm.AuthenticationError):
        litellm.rerank(model=f"jina_ai/{MODEL}", query=QUERY, documents=DOCS,
                       api_base=gw.url, api_key="not-a-gateway-key")
