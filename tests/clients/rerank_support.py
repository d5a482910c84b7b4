"""Shared by the rerank client tests: a fake Cohere v2 provider that scores by word overlap, and a
gateway whose `rerank-v3.5` model is served by it (next to the built-in `local-bm25`)."""

from __future__ import annotations

import re

import pytest

from conftest import Recorded, Reply

MODEL = "rerank-v3.5"
QUERY = "capital of France"
DOCS = [
    "Berlin is the capital of Germany.",
    "Paris is the capital of France.",
    "The Eiffel Tower is in Paris, France.",
    "Bananas are yellow.",
]
# The fake's scores for QUERY over DOCS (shared words / query words), and so the order expected.
SCORES = {0: 2 / 3, 1: 1.0, 2: 1 / 3, 3: 0.0}
ORDER = [1, 0, 2, 3]

PROVIDERS = '    cohere: {kind: cohere, api_key: "sk-fake", base_url: "{fake}"}\n'
MODELS = "    rerank-v3.5: {family: cohere-rerank, targets: [{provider: cohere, model: rerank-v3.5}]}\n"


def words(text: str) -> set[str]:
    return set(re.findall(r"\w+", text.lower()))


def cohere_v2(rec: Recorded) -> Reply:
    """Cohere's v2 rerank: every document scored, best first, no documents echoed."""
    body = rec.json()
    q = words(body["query"])
    scored = [
        {"index": i, "relevance_score": len(q & words(d)) / len(q)}
        for i, d in enumerate(body["documents"])
    ]
    scored.sort(key=lambda r: -r["relevance_score"])
    return Reply.json({
        "id": "fake-1",
        "results": scored[: body.get("top_n", len(scored))],
        "meta": {"api_version": {"version": "2"}, "billed_units": {"search_units": 1}},
    })


@pytest.fixture
def gw(fake, gateway):
    fake.route("POST", "/v2/rerank", cohere_v2)
    return gateway(fake, providers=PROVIDERS, models=MODELS)


def sent(fake) -> dict:
    """The one native request the fake received."""
    assert len(fake.requests) == 1, fake.requests
    return fake.requests[0].json()
