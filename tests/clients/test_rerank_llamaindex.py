"""LlamaIndex's rerank postprocessors against the gateway: `CohereRerank` (on Cohere's `ClientV2`)
given `base_url=<gateway>/compat/cohere`, and `JinaRerank` given `base_url=<gateway>/compat/jina/v1`
(it posts to `{base_url}/rerank`)."""

import pytest
from cohere.errors import BadRequestError
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
from llama_index.postprocessor.cohere_rerank import CohereRerank
from llama_index.postprocessor.jinaai_rerank import JinaRerank

from conftest import API_KEY
from rerank_support import DOCS, MODEL, ORDER, QUERY, SCORES, gw, sent  # noqa: F401 (fixture)


def nodes(n=len(DOCS)):
    return [NodeWithScore(node=TextNode(text=d, id_=f"n{i}")) for i, d in enumerate(DOCS[:n])]


def test_cohere_rerank_top_n_above_node_count(gw, fake):
    reranker = CohereRerank(api_key=API_KEY, base_url=gw.url + "/compat/cohere", model=MODEL, top_n=10)
    out = reranker.postprocess_nodes(nodes(), query_bundle=QueryBundle(QUERY))
    assert [n.node.id_ for n in out] == [f"n{i}" for i in ORDER]
    assert [n.score for n in out] == pytest.approx([SCORES[i] for i in ORDER])
    # The provider is asked for as many results as there are documents.
    assert sent(fake)["top_n"] == len(DOCS)


def test_cohere_rerank_error(gw):
    reranker = CohereRerank(api_key=API_KEY, base_url=gw.url + "/compat/cohere", model="no-such-model", max_retries=1)
    with pytest.raises(BadRequestError):
        reranker.postprocess_nodes(nodes(), query_bundle=QueryBundle(QUERY))


def test_jina_rerank_default_top_n_above_node_count(gw, fake):
    reranker = JinaRerank(api_key=API_KEY, base_url=gw.url + "/compat/jina/v1", model=MODEL, top_n=2)
    out = reranker.postprocess_nodes(nodes(), query_bundle=QueryBundle(QUERY))
    assert [n.node.id_ for n in out] == [f"n{i}" for i in ORDER[:2]]
    assert [n.score for n in out] == pytest.approx([SCORES[i] for i in ORDER[:2]])
    # The crash: the default top_n (2) with one retrieved node.
    out = JinaRerank(api_key=API_KEY, base_url=gw.url + "/compat/jina/v1", model="local-bm25").postprocess_nodes(
        nodes(1), query_bundle=QueryBundle(QUERY)
    )
    assert [n.node.id_ for n in out] == ["n0"]


def test_jina_rerank_error(gw):
    reranker = JinaRerank(api_key=API_KEY, base_url=gw.url + "/compat/jina/v1", model="no-such-model")
    with pytest.raises(RuntimeError, match="unknown model `no-such-model`"):
        reranker.postprocess_nodes(nodes(), query_bundle=QueryBundle(QUERY))
