"""OpenAI's Python SDK, images, against the gateway with only its base URL and key changed:
`images.generate` (url and b64_json, `output_format="jpeg"`), `images.edit` (image and mask as
the SDK's multipart form, reaching OpenAI byte for byte; several images as `image[]`; a model that
cannot edit, or takes fewer images, is a `BadRequestError`), and reading a task back (synchronous and `async`)."""

import base64
import time
import urllib.request

import openai
import pytest
from openai.types import ImagesResponse

from openai_fake import form_parts, images_response, openai_gateway, png


def test_generate_b64_json(gateway, fake):
    gw, client = openai_gateway(gateway, fake)
    images = [png(1), png(2)]
    fake.route("POST", "/v1/images/generations", images_response(images))
    resp = client.images.generate(model="gpt-image-2", prompt="a lighthouse", n=2, size="1536x1024",
                                  quality="high", response_format="b64_json")
    assert isinstance(resp, ImagesResponse)
    assert [base64.b64decode(d.b64_json) for d in resp.data] == images
    assert resp.created == 1713833628
    sent = fake.requests[0].json()
    assert (sent["model"], sent["n"], sent["size"], sent["quality"]) == ("gpt-image-2", 2, "1536x1024", "high")
    assert "response_format" not in sent, "GPT image models refuse it; the gateway delivers"


def test_parameters_sent_as_null_are_absent(gateway, fake):
    """The SDK sends an explicit `None` as JSON `null`; the gateway reads it as absent, whether the
    name is a public field (`quality`: its default) or one the model does not take (`style`)."""
    gw, client = openai_gateway(gateway, fake)
    fake.route("POST", "/v1/images/generations", images_response([png(4)]))
    resp = client.images.generate(model="gpt-image-2", prompt="p", response_format="b64_json",
                                  quality=None, style=None, user=None)
    assert base64.b64decode(resp.data[0].b64_json) == png(4)
    raw = fake.requests[0].body
    sent = fake.requests[0].json()
    assert b"null" not in raw, "a null reached the provider"
    assert "quality" not in sent and "style" not in sent and "user" not in sent


def test_generate_url(gateway, fake):
    gw, client = openai_gateway(gateway, fake)
    image = png(3)
    fake.route("POST", "/v1/images/generations", images_response([image]))
    resp = client.images.generate(model="gpt-image-2", prompt="p", response_format="url")
    url = resp.data[0].url
    assert url.startswith(gw.url + "/api/v1/files/")
    with urllib.request.urlopen(url, timeout=10) as r:
        assert r.read() == image
        assert r.headers["content-type"] == "image/png"


def test_generate_output_format_jpeg(gateway, fake):
    gw, client = openai_gateway(gateway, fake)
    jpeg = b"\xff\xd8\xff\xe0" + bytes(60)
    fake.route("POST", "/v1/images/generations", images_response([jpeg], "jpeg"))
    resp = client.images.generate(model="gpt-image-2", prompt="p", output_format="jpeg",
                                  response_format="b64_json")
    assert base64.b64decode(resp.data[0].b64_json) == jpeg
    assert fake.requests[0].json()["output_format"] == "jpeg"


def test_edit_image_and_mask_reach_openai_byte_for_byte(gateway, fake, tmp_path):
    gw, client = openai_gateway(gateway, fake)
    out = png(9)
    fake.route("POST", "/v1/images/edits", images_response([out]))
    image, mask = png(4, side=32), png(5, side=32)
    (tmp_path / "room.png").write_bytes(image)
    with open(tmp_path / "room.png", "rb") as f:
        resp = client.images.edit(model="gpt-image-2", image=f, mask=("mask.png", mask, "image/png"),
                                  prompt="add a cat", n=1, size="1024x1024", quality="medium",
                                  response_format="b64_json", output_format="png", background="opaque",
                                  user="user-1")
    assert base64.b64decode(resp.data[0].b64_json) == out
    (sent,) = fake.requests
    assert sent.path == "/v1/images/edits"
    assert sent.headers["authorization"] == "Bearer sk-x"
    parts = form_parts(sent)
    files = {name: (ctype, data) for name, filename, ctype, data in parts if filename}
    assert files == {"image": ("image/png", image), "mask": ("image/png", mask)}
    fields = {name: data.decode() for name, filename, _, data in parts if not filename}
    assert fields == {"prompt": "add a cat", "model": "gpt-image-2", "n": "1", "size": "1024x1024",
                      "quality": "medium", "output_format": "png", "background": "opaque", "user": "user-1"}


def test_edit_with_a_model_that_cannot_edit_is_a_bad_request(gateway, fake):
    gw, client = openai_gateway(gateway, fake)
    with pytest.raises(openai.BadRequestError) as e:
        client.images.edit(model="cogview-4", image=("a.png", png(1), "image/png"), prompt="p")
    assert e.value.status_code == 400
    assert e.value.code == "validation_error"
    assert "does not support image" in e.value.body["details"]["image"]
    # Several images to a model that takes one: named too.
    with pytest.raises(openai.BadRequestError) as e:
        client.images.edit(model="seededit-3", prompt="p",
                           image=[("a.png", png(1), "image/png"), ("b.png", png(2), "image/png")])
    assert e.value.body["details"]["image"] == "model seededit-3 takes at most 1 reference image(s); 2 were given"
    assert fake.requests == [], "a refused edit reached a provider"


def test_edit_with_several_images(gateway, fake):
    gw, client = openai_gateway(gateway, fake)
    fake.route("POST", "/v1/images/edits", images_response([png(8)]))
    images = [png(10, side=16), png(11, side=16), png(12, side=16)]
    resp = client.images.edit(model="gpt-image-2", prompt="a gift basket of these",
                              image=[(f"{i}.png", img, "image/png") for i, img in enumerate(images)],
                              response_format="b64_json")
    assert base64.b64decode(resp.data[0].b64_json) == png(8)
    parts = form_parts(fake.requests[0])
    assert [(name, data) for name, _, _, data in parts if name.startswith("image")] == \
        [("image[]", img) for img in images]


def test_a_synchronous_answer_reads_back_as_a_task(gateway, fake):
    gw, client = openai_gateway(gateway, fake)
    image = png(6)
    fake.route("POST", "/v1/images/generations", images_response([image]))
    resp = client.images.generate(model="gpt-image-2", prompt="p")
    task_id = resp.model_extra["task_id"]
    assert resp.model_extra["task_status"] == "succeed"
    again = client.get(f"/images/{task_id}", cast_to=ImagesResponse)
    assert again.model_extra["task_status"] == "succeed"
    assert again.data[0].url == resp.data[0].url
    assert len(fake.requests) == 1, "reading back called the provider again"


def test_an_async_generation_is_polled_to_its_result(gateway, fake):
    gw, client = openai_gateway(gateway, fake)
    image = png(7)
    fake.route("POST", "/v1/images/generations", images_response([image]))
    started = client.images.generate(model="gpt-image-2", prompt="p", response_format="b64_json",
                                     extra_body={"async": True})
    assert started.data == []
    task_id = started.model_extra["task_id"]
    deadline = time.monotonic() + 10
    while True:
        task = client.get(f"/images/{task_id}", cast_to=ImagesResponse)
        if task.model_extra["task_status"] in ("succeed", "failed"):
            break
        assert time.monotonic() < deadline, task
        time.sleep(0.05)
    assert task.model_extra["task_status"] == "succeed"
    assert base64.b64decode(task.data[0].b64_json) == image
    with pytest.raises(openai.NotFoundError):
        client.get("/images/6f1c2d4e-0000-4000-8000-000000000000", cast_to=ImagesResponse)
