#!/usr/bin/env python3
"""Write seed inputs for the fuzz targets into fuzz/corpus/<target>/ (then `cargo fuzz cmin`).

Seeds are real inputs: valid request bodies, the default config, and the provider answers the
gateway's own tests use (every JSON raw string in src/providers and tests/it). Each target's
input layout is described in its source (fuzz_targets/<target>.rs).
"""
import base64, glob, hashlib, json, os, re

ROOT = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(ROOT)


def put(target, data):
    if isinstance(data, str):
        data = data.encode()
    d = os.path.join(ROOT, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, hashlib.sha1(data).hexdigest()), "wb") as f:
        f.write(data)


def literals(patterns):
    out = []
    for pat in patterns:
        for f in sorted(glob.glob(os.path.join(REPO, pat), recursive=True)):
            text = open(f).read()
            for m in re.finditer(r'r#"(.*?)"#', text, re.S):
                t = m.group(1)
                if t.lstrip().startswith(("{", "[")) and len(t) < 4000:
                    out.append((os.path.basename(f), t))
    return out


PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
DOCS = ["rust is a language", "a fox", "iron oxide"]

# request_bodies: selector (0 speech, 1 images, 2 rerank, 3 Cohere v1, 4 Cohere v2, 5 Jina) + body
for sel, body in [
    (0, {"model": "tts-1", "input": "Hello", "voice": "alloy"}),
    (0, {"model": "gpt-4o-mini-tts", "input": "Hi", "instructions": "softly", "stream_format": "sse", "speed": 1}),
    (0, {"model": "speech-2.8-hd", "input": "Hi", "response_format": "wav", "retries": 2}),
    (1, {"model": "gpt-image-1", "prompt": "a fox", "n": 2, "size": "1024x1024", "response_format": "b64_json"}),
    (1, {"model": "flux-kontext-pro", "prompt": "a fox", "image": "data:image/png;base64," + PNG, "aspect_ratio": "1:1"}),
    (1, {"model": "qwen-image-edit", "prompt": "a fox", "image": ["https://example.com/a.png"], "negative_prompt": "x"}),
    (2, {"model": "rerank-v3.5", "query": "q", "documents": DOCS, "top_n": 2, "return_documents": False}),
    (3, {"model": "rerank-english-v3.0", "query": "q", "documents": [{"text": "a"}, "b"], "rank_fields": ["text"], "top_n": None}),
    (4, {"model": "rerank-v3.5", "query": "q", "documents": DOCS, "max_tokens_per_doc": 512}),
    (5, {"model": "jina-reranker-v3", "query": "q", "documents": [{"text": "a"}], "return_documents": False}),
]:
    put("request_bodies", bytes([sel]) + json.dumps(body).encode())

# image_input
for v in ["https://example.com/cat.png", "data:image/png;base64," + PNG, PNG,
          "data:image/jpeg;base64,/9j/4AAQSkZJRgABAQ==", "R0lGODlhAQABAAAAACw="]:
    put("image_input", v)

# multipart: selector 0 (boundary X), 1 (JSON), 3 (content type on the first line)
form = (b"--X\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\ngpt-image-1\r\n"
        b"--X\r\nContent-Disposition: form-data; name=\"prompt\"\r\n\r\na fox\r\n"
        b"--X\r\nContent-Disposition: form-data; name=\"n\"\r\n\r\n2\r\n"
        b"--X\r\nContent-Disposition: form-data; name=\"image[]\"; filename=\"a.png\"\r\n"
        b"Content-Type: image/png\r\n\r\n" + base64.b64decode(PNG) + b"\r\n--X--\r\n")
put("multipart", b"\x00" + form)
put("multipart", b"\x03multipart/form-data; boundary=\"X\"\n" + form)
put("multipart", b"\x01" + json.dumps({"model": "gpt-image-1", "prompt": "a", "image": PNG}).encode())

# stream_framing: selector (even SSE, odd NDJSON), sizes count, sizes, stream
put("stream_framing", b"\x00\x03\x01\x05\x11" + b"data: {\"a\":1}\n\nevent: x\r\ndata: y\r\n\r\n: c\r\rdata: z")
put("stream_framing", b"\x01\x02\x02\x07" + b"{\"a\":1}\n\r\n{\"b\":2}\r\n\n{\"c\":3}")

# provider_answers: selector (0 rerank, 1 images, 2 task poll, 3 error), case, status, headers, body
answers = literals(["src/providers/**/*.rs", "tests/it/*.rs"])
for i, (name, body) in enumerate(answers):
    if "results" in body or "rerank" in name:
        sel = 0
    elif "task" in body.lower() or "status" in body:
        sel = 2
    elif "error" in body or "code" in body:
        sel = 3
    else:
        sel = 1
    status = 200 if sel != 3 else [400, 401, 429, 500, 503][i % 5]
    hdr = b"retry-after: 2\n" if sel == 3 else b""
    put("provider_answers", bytes([sel, i % 64]) + status.to_bytes(2, "big") + bytes([len(hdr)]) + hdr + body.encode())

# speech_decoders: case, sizes count, sizes, body; answers as raw JSON, SSE events and NDJSON lines
speech = [t for n, t in answers if "speech" in n or any(p in n for p in ("minimax", "volcengine", "google", "elevenlabs"))]
for i, body in enumerate(speech):
    one = body
    for j, wrapped in enumerate([body, "data: " + one.replace("\n", "") + "\n\n", one.replace("\n", "") + "\n"]):
        put("speech_decoders", bytes([(i * 3 + j) % 64, 2, 7, 40]) + wrapped.encode())

# jwt: 0 Authorization, 1 service-api-key, 2 signed token (header 0xFF claims)
put("jwt", b"\x00Bearer fuzz-api-key")
put("jwt", b"\x01fuzz-api-key")
put("jwt", b"\x00Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln")
put("jwt", b"\x02" + b'{"alg":"HS256","typ":"JWT"}' + b"\xff" +
    b'{"sub":"alice","iss":"https://issuer.example","aud":"switchyard","exp":4102444800}')
put("jwt", b"\x02" + b'{"alg":"HS256"}' + b"\xff" + b'{"sub":"bob","exp":1}')

# config
put("config", open(os.path.join(REPO, "conf/switchyard.yaml")).read())
put("config", "switchyard:\n  listeners: [{name: a, region: r, address: 127.0.0.1:1}]\n  providers: {}\n  models: {}\n")
