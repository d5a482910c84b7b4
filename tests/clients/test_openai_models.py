"""OpenAI's Python SDK, models, against the gateway with only its base URL and key changed:
`models.list()` and `models.retrieve()` read `GET /api/v1/models` (OpenAI's list shape) and
keep the gateway's own fields (operation, capabilities…) as extra attributes."""

import openai
import pytest

from openai_fake import MODELS, openai_gateway


def test_models_list(gateway, fake):
    gw, client = openai_gateway(gateway, fake)
    page = client.models.list()
    models = list(page)
    ids = [m.id for m in models]
    # conftest's built-in reranker plus the OpenAI suite's models, sorted.
    want = sorted(["local-bm25"] + [line.split(":")[0].strip() for line in MODELS.splitlines()])
    assert ids == want
    by_id = {m.id: m for m in models}
    tts = by_id["tts-1"]
    assert (tts.object, tts.owned_by) == ("model", "openai")
    assert isinstance(tts.created, int) and tts.created > 0
    # The gateway's fields ride along: the SDK keeps them.
    extra = tts.model_extra
    assert extra["operation"] == "speech"
    assert extra["available"] is True
    assert "mp3" in extra["capabilities"]["formats"]
    assert extra["capabilities"]["default_voice"] == "alloy"
    assert by_id["gpt-image-2"].model_extra["operation"] == "images"
    assert by_id["local-bm25"].model_extra["operation"] == "rerank"
    assert by_id["local-bm25"].owned_by == "local"
    assert fake.requests == [], "listing asks no provider"


def test_models_retrieve(gateway, fake):
    gw, client = openai_gateway(gateway, fake)
    model = client.models.retrieve("tts-1")
    assert (model.id, model.object, model.owned_by) == ("tts-1", "model", "openai")
    assert model.model_extra["family"] == "openai-tts"
    [target] = model.model_extra["targets"]
    # tts-1 is deprecated: its target carries the provider's dates (docs/guide/lifecycles.md).
    lifecycle = target.pop("lifecycle")
    # Its price, as the built-in table has it (docs/guide/prices.md): $15 per million characters.
    price = target.pop("price")
    assert target == {"provider": "openai", "model": "tts-1", "available": True}
    assert (price["currency"], price["characters"]) == ("USD", {"price": "15", "per": 1000000})
    assert (lifecycle["shutdown"], lifecycle["replacement"]) == ("2027-01-06", ["gpt-realtime-2.1-mini"])
    assert model.model_extra["lifecycle"]["shutdown"] == "2027-01-06"
    with pytest.raises(openai.NotFoundError) as err:
        client.models.retrieve("no-such-model")
    assert err.value.status_code == 404
    assert err.value.body["code"] == "not_found"


def test_models_need_the_key(gateway, fake):
    gw, _ = openai_gateway(gateway, fake)
    wrong = openai.OpenAI(base_url=gw.base, api_key="wrong", max_retries=0, timeout=20)
    with pytest.raises(openai.AuthenticationError):
        wrong.models.list()
