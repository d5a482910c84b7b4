"""LangChain's rerankers against the gateway: `CohereRerank` (langchain-cohere, on Cohere's
`ClientV2`) given `base_url=<gateway>/compat/cohere`, and `JinaRerank` (langchain-community), whose
URL is the module constant `JINA_API_URL` (it has no base URL setting), set to
`<gateway>/compat/jina/v1/rerank`."""

import pytest
from cohere.errors import BadRequestError
from langchain_cohere import CohereRerank
from langchain_community.document_compressors import jina_rerank
from langchain_core.documents import Document

from conftest import API_KEY
from rerank_support import DOCS, MODEL, ORDER, QUERY, SCORES, gw, sent  # noqa: F401 (fixture)

DOCUMENTS = [Document(page_content=d, metadata={"n": i}) for i, d in enumerate(DOCS)]


def test_cohere_rerank(gw, fake):
    reranker = CohereRerank(cohere_api_key=API_KEY, base_url=gw.url + "/compat/cohere", model=MODEL, top_n=3)
    out = reranker.compress_documents(DOCUMENTS, QUERY)
    assert [d.metadata["n"] for d in out] == ORDER[:3]
    assert [d.page_content for d in out] == [DOCS[i] for i in ORDER[:3]]
    assert [d.metadata["relevance_score"] for d in out] == pytest.approx([SCORES[i] for i in ORDER[:3]])
    assert sent(fake)["top_n"] == 3


def test_cohere_rerank_default_top_n_over_fewer_documents(gw):
    # top_n defaults to 3; two documents retrieved.
    reranker = CohereRerank(cohere_api_key=API_KEY, base_url=gw.url + "/compat/cohere", model="local-bm25")
    out = reranker.compress_documents(DOCUMENTS[:2], QUERY)
    assert [d.metadata["n"] for d in out] == [1, 0]


def test_cohere_rerank_error(gw):
    reranker = CohereRerank(cohere_api_key=API_KEY, base_url=gw.url + "/compat/cohere", model="no-such-model")
    with pytest.raises(BadRequestError) as e:
        reranker.compress_documents(DOCUMENTS, QUERY)
    assert "unknown model" in e.value.body["message"]


@pytest.fixture
def jina_url(gw, monkeypatch):
    monkeypatch.setattr(jina_rerank, "JINA_API_URL", gw.url + "/compat/jina/v1/rerank")


def test_jina_rerank(gw, fake, jina_url):
    reranker = jina_rerank.JinaRerank(jina_api_key=API_KEY, model=MODEL, top_n=2)
    out = reranker.compress_documents(DOCUMENTS, QUERY)
    assert [d.metadata["n"] for d in out] == ORDER[:2]
    assert [d.metadata["relevance_score"] for d in out] == pytest.approx([SCORES[i] for i in ORDER[:2]])
    # Its default top_n (3) over two documents.
    out = jina_rerank.JinaRerank(jina_api_key=API_KEY, model="local-bm25").compress_documents(DOCUMENTS[:2], QUERY)
    assert [d.metadata["n"] for d in out] == [1, 0]


def test_jina_rerank_error(gw, jina_url):
    reranker = jina_rerank.JinaRerank(jina_api_key="not-a-gateway-key", model=MODEL)
    # JinaRerank raises Jina's `detail` when an answer has no results.
    with pytest.raises(RuntimeError, match="API key"):
        reranker.compress_documents(DOCUMENTS, QUERY)
