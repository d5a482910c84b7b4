"""OpenAI's Python SDK raises its typed exceptions for the gateway's errors, as it does for
OpenAI's own: 400 `BadRequestError` with the validation details, 401 `AuthenticationError`, 404
`NotFoundError`, 429 `RateLimitError` (with `Retry-After` passed on), 5xx `InternalServerError`."""

import openai
import pytest
from openai import OpenAI

from openai_fake import openai_error, openai_gateway


def test_a_bad_key_is_an_authentication_error(gateway, fake):
    gw, _ = openai_gateway(gateway, fake)
    client = OpenAI(base_url=gw.base, api_key="not-a-gateway-key", max_retries=0)
    with pytest.raises(openai.AuthenticationError) as e:
        client.audio.speech.create(model="tts-1", voice="alloy", input="hi")
    assert e.value.status_code == 401
    assert e.value.code == "unauthorized"
    assert fake.requests == []


def test_validation_errors_are_bad_requests_with_their_details(gateway, fake):
    gw, client = openai_gateway(gateway, fake)
    with pytest.raises(openai.BadRequestError) as e:
        client.audio.speech.create(model="tts-1", voice="alloy", input="hi", speed=3,
                                   response_format="wav", instructions="warmly")
    assert e.value.code == "validation_error"
    details = e.value.body["details"]
    assert set(details) == {"speed", "instructions"}, details
    assert "0.25, 0.5, 1, 2, 4" in details["speed"]
    with pytest.raises(openai.BadRequestError) as e:
        client.images.generate(model="gpt-image-2", prompt="p", size="100x100", output_format="gif")
    assert set(e.value.body["details"]) == {"size", "output_format"}
    with pytest.raises(openai.BadRequestError) as e:
        client.images.generate(model="no-such-model", prompt="p")
    assert "model" in e.value.body["details"]
    assert fake.requests == []


def test_provider_refusals_and_limits_are_typed(gateway, fake):
    gw, client = openai_gateway(gateway, fake)
    path = "/v1/images/generations"
    fake.route("POST", path, openai_error(400, "image_generation_user_error", "moderation_blocked",
                                          "Your request was rejected by the safety system."))
    with pytest.raises(openai.BadRequestError) as e:
        client.images.generate(model="gpt-image-2", prompt="p")
    assert e.value.code == "content_policy_violation"

    fake.route("POST", path, openai_error(429, "requests", "rate_limit_exceeded", "Rate limit reached",
                                          {"Retry-After": "7"}))
    with pytest.raises(openai.RateLimitError) as e:
        client.images.generate(model="gpt-image-2", prompt="p")
    assert e.value.code == "rate_limited"
    assert e.value.response.headers["retry-after"] == "7"

    fake.route("POST", path, openai_error(401, "invalid_request_error", "invalid_api_key", "Incorrect API key"))
    with pytest.raises(openai.InternalServerError) as e:
        client.images.generate(model="gpt-image-2", prompt="p")
    assert (e.value.status_code, e.value.code) == (502, "upstream_auth_failed"), "never the caller's 401"

    with pytest.raises(openai.NotFoundError):
        client.get("/images/not-a-task", cast_to=object)
