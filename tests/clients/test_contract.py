"""The OpenAPI contract: the document the gateway serves is valid OpenAPI 3.1 and is the committed
file, and schemathesis, run against the real gateway, finds no answer outside it and no 5xx but the
documented 503s.

The gateway under test has models that answer (the built-in BM25 reranker; OpenAI speech and
images and Cohere rerank pointed at a fake provider that always answers well), models whose
provider refuses every request (a content policy refusal, a rejected parameter: documented 400s)
and models whose provider has no key (they answer `503 model_unavailable`). Every operation is
exercised: image edits both as the SDK's multipart form (schemathesis sends real PNG, JPEG, GIF and
WebP files among random bytes) and as JSON, and the rerank compatibility surfaces (Cohere v1 and
v2, Jina, Jina at the root) with the same models as `/api/v1/rerank`. Schemathesis generates
requests from the document itself, narrowed to this configuration (`narrowed`), so that generated
requests reach the providers instead of stopping at "unknown model" or "unknown field" (which
negative examples still exercise).

Bounded: a fixed seed, `CONTRACT_MAX_EXAMPLES` (100) examples per operation, one worker (with two, hypothesis'
concurrent `ast.parse` calls failed on CPython 3.11.7: "AST constructor recursion depth
mismatch"), about 20 s for some 3000 cases. To explore
further: `CONTRACT_SEED=n CONTRACT_MAX_EXAMPLES=500 CONTRACT_EXTRA_CHECKS=use_after_free,...`.
"""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from conftest import API_KEY, Reply
from openapi_spec_validator import OpenAPIV31SpecValidator

ROOT = Path(__file__).resolve().parents[2]
DOCUMENT = ROOT / "openapi" / "openapi.json"
# A PNG's signature and header: the gateway recognises hosted images by their bytes.
PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89"

PROVIDERS = """    openai: {kind: openai, api_key: "sk-fake", base_url: "{fake}/v1"}
    cohere: {kind: cohere, api_key: "sk-fake", base_url: "{fake}"}
    openai-refusing: {kind: openai, api_key: "sk-fake", base_url: "{fake}/refusing/v1"}
    cohere-refusing: {kind: cohere, api_key: "sk-fake", base_url: "{fake}/refusing"}
    openai-nokey: {kind: openai, api_key: "", base_url: "{fake}/v1"}
    cohere-nokey: {kind: cohere, api_key: "", base_url: "{fake}"}
"""
IMAGE_MODELS = {
    "gpt-image-2": ("gpt-image-2", "openai"),
    "gpt-image-nokey": ("gpt-image", "openai-nokey"),
    "gpt-image-refused": ("gpt-image", "openai-refusing"),
}
RERANK_MODELS = {
    "local-bm25": None,
    "rerank-v3.5": ("cohere-rerank", "cohere"),
    "rerank-nokey": ("cohere-rerank", "cohere-nokey"),
    "rerank-refused": ("cohere-rerank", "cohere-refusing"),
}
# Each operation's models here (the rerank compatibility surfaces take the same models as
# /api/v1/rerank, and edits those of generations: GPT image models take a reference image and a mask).
MODELS = {
    "createSpeech": {
        "tts-1": ("openai-tts", "openai"),
        "gpt-4o-mini-tts": ("openai-tts-instruct", "openai"),
        "tts-1-nokey": ("openai-tts", "openai-nokey"),
    },
    "createImage": IMAGE_MODELS,
    "editImage": IMAGE_MODELS,
    "rerank": RERANK_MODELS,
    "cohereRerankV1": RERANK_MODELS,
    "cohereRerankV2": RERANK_MODELS,
    "jinaRerank": RERANK_MODELS,
    "jinaRerankAtRoot": RERANK_MODELS,
}
# The request schema of each operation (edits' JSON body is generations' `ImageRequest` plus `image`).
REQUEST_SCHEMAS = {
    "createSpeech": "SpeechRequest",
    "createImage": "ImageRequest",
    "editImage": "ImageEditForm",
    "rerank": "RerankRequest",
    "cohereRerankV1": "CohereRerankRequest",
    "cohereRerankV2": "CohereRerankRequest",
    "jinaRerank": "JinaRerankRequest",
    "jinaRerankAtRoot": "JinaRerankRequest",
}
# conftest's `retries: {max: 3}`.
RETRIES_MAX = 3
CHECKS = [
    "status_code_conformance",
    "content_type_conformance",
    "response_schema_conformance",
    "response_headers_conformance",
    "unsupported_method",
    "allow_header_conformance",
    "negative_data_rejection",
    "ignored_auth",
    "only_documented_unavailability",
    "tally_answers",
] + [c for c in os.environ.get("CONTRACT_EXTRA_CHECKS", "").split(",") if c]


def models_yaml() -> str:
    lines = []
    specs = {name: spec for models in MODELS.values() for name, spec in models.items()}
    for name, spec in specs.items():
        if spec is None:
            continue
        family, provider = spec
        native = name.removesuffix("-nokey").removesuffix("-refused")
        lines.append(f"    {name}: {{family: {family}, targets: [{{provider: {provider}, model: {native}}}]}}\n")
    return "".join(lines)


def speech(rec):
    body = rec.json()
    if body.get("stream_format") == "sse":
        audio = base64.b64encode(b"\xff\xf3audio").decode()
        events = [
            {"type": "speech.audio.delta", "audio": audio},
            {"type": "speech.audio.done", "usage": {"input_tokens": 3, "output_tokens": 5, "total_tokens": 8}},
        ]
        chunks = [b"data: " + json.dumps(e).encode() + b"\n\n" for e in events]
        return Reply(200, chunks, {"Content-Type": "text/event-stream"})
    return Reply(200, b"\xff\xf3" + b"\x00" * 64, {"Content-Type": "audio/mpeg"})


def images(rec):
    if rec.headers.get("content-type", "").startswith("multipart/"):
        m = re.search(rb'name="n"\r\n\r\n(\d+)', rec.body)
        n = int(m.group(1)) if m else 1
    else:
        n = int(rec.json().get("n", 1))
    item = {"b64_json": base64.b64encode(PNG).decode()}
    return Reply.json({"created": 1700000000, "data": [item] * n})


def rerank(rec):
    body = rec.json()
    docs = body.get("documents", [])
    results = [{"index": i, "relevance_score": 1.0 / (i + 1)} for i in range(len(docs))]
    if "top_n" in body:
        results = results[: body["top_n"]]
    return Reply.json({"id": "x", "results": results, "meta": {"billed_units": {"search_units": 1}}})


def served_document(gw) -> dict:
    with urllib.request.urlopen(gw.url + "/api/v1/openapi.json", timeout=5) as r:
        assert r.status == 200
        assert r.headers["Content-Type"] == "application/json"
        return json.loads(r.read())


def test_served_document_is_valid_openapi_3_1_and_the_committed_file(gateway):
    gw = gateway()
    doc = served_document(gw)
    assert doc == json.loads(DOCUMENT.read_text())
    errors = [e.message for e in OpenAPIV31SpecValidator(doc).iter_errors()]
    assert errors == []
    # Every operation that needs credentials offers both of the spec's schemes, and the bare key.
    schemes = {k for alt in doc["security"] for k in alt}
    assert schemes == {"bearerAuth", "serviceApiKey", "authorizationKey"}


def narrowed(doc: dict) -> dict:
    """The document as it holds for this gateway's configuration: each operation's `model` one of
    its models here, no fields beyond the API's (these models take none of the random names
    schemathesis would add: those are 400s, as documented) and `retries` up to this gateway's cap."""
    schemas = doc["components"]["schemas"]
    for op, name in REQUEST_SCHEMAS.items():
        schema = schemas[name]
        schema["properties"]["model"]["enum"] = list(MODELS[op])
        schema["additionalProperties"] = False
        schema["properties"]["retries"]["maximum"] = RETRIES_MAX
    # A JSON edit's `image` a real picture, so that generated edits reach the provider (random
    # strings are 400s, which the multipart form's random files and negative examples exercise).
    png = base64.b64encode(PNG).decode()
    images = [png, "data:image/png;base64," + png, [png, png]]
    schemas["ImageEditRequest"]["allOf"][1]["properties"] = {"image": {"enum": images}}
    return doc


def test_schemathesis_finds_no_answer_outside_the_document(fake, gateway, tmp_path):
    fake.route("POST", "/v1/audio/speech", speech)
    fake.route("POST", "/v1/images/generations", images)
    fake.route("POST", "/v1/images/edits", images)
    fake.route("POST", "/v2/rerank", rerank)
    refusal = {"error": {"code": "content_policy_violation", "message": "refused", "type": "invalid_request_error"}}
    fake.route("POST", "/refusing/v1/images/generations", Reply.json(refusal, 400))
    fake.route("POST", "/refusing/v1/images/edits", Reply.json(refusal, 400))
    fake.route("POST", "/refusing/v2/rerank", Reply.json({"message": "invalid request: top_n"}, 400))
    gw = gateway(fake, providers=PROVIDERS, models=models_yaml())
    schema = tmp_path / "openapi.json"
    schema.write_text(json.dumps(narrowed(served_document(gw))))

    st = Path(sys.executable).with_name("st")
    cmd = [
        str(st), "run", str(schema),
        "--url", gw.url,
        "-H", f"Authorization: Bearer {API_KEY}",
        "--checks", ",".join(CHECKS),
        "--max-examples", os.environ.get("CONTRACT_MAX_EXAMPLES", "100"),
        "--seed", os.environ.get("CONTRACT_SEED", "18"),
        "--workers", "1",
        "--request-timeout", "10",
        "--generation-database", "none",
        "--no-color",
    ]
    tally = tmp_path / "tally.tsv"
    env = {
        **os.environ,
        "SCHEMATHESIS_HOOKS": "contract_hooks",
        "PYTHONPATH": str(Path(__file__).parent),
        "CONTRACT_TALLY": str(tally),
    }
    started = time.monotonic()
    run = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240)
    took = time.monotonic() - started
    output = run.stdout + run.stderr
    print(output[-6000:])
    print(f"schemathesis: {took:.0f} s")
    assert run.returncode == 0, output[-12000:]
    seen = {}
    media = {}
    for line in tally.read_text().splitlines():
        op, status, code, media_type = line.split("\t")
        seen.setdefault(op, set()).add((int(status), code))
        media.setdefault((op, int(status)), set()).add(media_type)
    print("answers:", json.dumps({op: sorted(map(list, v)) for op, v in seen.items()}, indent=1))
    # It really exercised the gateway: every operation answered 200 (the POSTs through the fake
    # provider, the files the gateway hosted, image answers read back by their task_id), and
    # models without a key their documented 503.
    posts = ["POST /api/v1/audio/speech", "POST /api/v1/images/generations", "POST /api/v1/images/edits",
             "POST /api/v1/rerank", "POST /compat/cohere/v1/rerank", "POST /compat/cohere/v2/rerank",
             "POST /compat/jina/v1/rerank", "POST /v1/rerank"]
    for op in posts + ["GET /api/v1/files/{id}", "GET /api/v1/images/{task_id}", "GET /api/v1/openapi.json",
                       "GET /healthz", "GET /api/v1/models", "GET /api/v1/models/{id}"]:
        assert any(s == 200 for s, _ in seen.get(op, ())), f"{op} never answered 200"
    for op in posts:
        assert (503, "model_unavailable") in seen[op], f"{op} never reached a model without a key"
    # Edits went through with both bodies: the SDK's multipart form (files) and JSON.
    assert {"multipart/form-data", "application/json"} <= media[("POST /api/v1/images/edits", 200)]
    for op in ["POST /api/v1/images/generations", "POST /api/v1/images/edits"]:
        assert (400, "content_policy_violation") in seen[op], op
    for op in ["POST /api/v1/rerank", "POST /compat/cohere/v2/rerank", "POST /v1/rerank"]:
        assert (400, "invalid_request") in seen[op], op
    paths = {r.path for r in fake.requests}
    assert {"/v1/audio/speech", "/v1/images/generations", "/v1/images/edits", "/v2/rerank"} <= paths, paths


def test_each_documented_auth_scheme_authenticates(gateway):
    """The document's three security schemes are the headers the gateway takes, as each says."""
    gw = gateway()
    schemes = served_document(gw)["components"]["securitySchemes"]
    headers = {}
    for name, scheme in schemes.items():
        if scheme["type"] == "http":
            assert scheme["scheme"] == "bearer"
            headers[name] = {"Authorization": f"Bearer {API_KEY}"}
        else:
            assert scheme["type"] == "apiKey" and scheme["in"] == "header"
            headers[name] = {scheme["name"]: API_KEY}
    assert headers["authorizationKey"] == {"Authorization": API_KEY}
    assert headers["serviceApiKey"] == {"Service-API-Key": API_KEY}
    body = json.dumps({"model": "local-bm25", "query": "capital of France", "documents": ["Paris", "Berlin"]}).encode()

    def post(extra):
        req = urllib.request.Request(gw.base + "/rerank", data=body, headers={"Content-Type": "application/json", **extra})
        try:
            with urllib.request.urlopen(req, timeout=5) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    for name, extra in headers.items():
        status, answer = post(extra)
        assert status == 200, (name, answer)
        assert answer["results"][0]["document"] == "Paris"
    for extra in [{}, {"Authorization": "Bearer wrong"}, {"Service-API-Key": "wrong"}, {"Authorization": "wrong"}]:
        status, answer = post(extra)
        assert (status, answer["code"]) == (401, "unauthorized"), extra
