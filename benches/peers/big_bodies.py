#!/usr/bin/env python3
"""Adds the big-body endpoints (rerank_100, image_b64_big) to a writable copy of the peer harness.

Called by setup.sh (which says what the endpoints are). Writes the fake's two static answers and the
two request bodies, and inserts two routes into fake/nginx.conf and two cases into each of
run-peers.sh's make_body and verify. Each insertion goes before a line the harness is known to
have; when that line is missing nothing is written and the script exits 1. A copy already
prepared (its marker present) is left as it is.
"""
import base64
import json
import sys
from pathlib import Path

MARK = "# big bodies (Switchyard benches/peers/setup.sh)"

# The throughput bench's twelve sentences (benches/throughput/workload.rs), so that both benches send the same
# documents: document i joins three of them, each of the 100 different (about 270 characters).
SENTENCES = [
    "Carson City is the capital city of the American state of Nevada.",
    "The Commonwealth of the Northern Mariana Islands is a group of islands in the Pacific Ocean.",
    "Washington, D.C. is the capital of the United States and a federal district.",
    "Capitalization in English grammar is the use of a capital letter at the start of a word.",
    "Capital punishment has existed in the United States since before it was a country.",
    "Paris has been the capital of France since the tenth century, with brief interruptions.",
    "The Yellowstone caldera is a volcanic caldera and supervolcano in Yellowstone National Park.",
    "Photosynthesis converts light energy into chemical energy stored in glucose.",
    "The Great Barrier Reef is the world's largest coral reef system, off Queensland, Australia.",
    "Rust is a general-purpose programming language emphasizing performance and memory safety.",
    "Mount Kilimanjaro is a dormant volcano in Tanzania and the highest mountain in Africa.",
    "The Rosetta Stone is a stele inscribed with three versions of a decree issued in 196 BC.",
]
DOCS = 100
IMAGE_BYTES = 1_179_648  # its base64 is 1,572,864 characters


def document(i):
    n = len(SENTENCES)
    return f"{SENTENCES[i % n]} {SENTENCES[(i * 5 + 3) % n]} {SENTENCES[(i * 7 + 1) % n]} (Passage {i}.)"


def rerank_body():
    return json.dumps(
        {
            "model": "@MODEL@",
            "query": "What is the capital of the United States?",
            "documents": [document(i) for i in range(DOCS)],
        },
        separators=(",", ":"),
    )


def rerank_answer():
    results = [
        {"index": (i * 7) % DOCS, "relevance_score": round(0.99 - i * 0.009, 6)} for i in range(DOCS)
    ]
    return json.dumps(
        {
            "id": "fake-rerank-0100",
            "results": results,
            "meta": {"api_version": {"version": "2"}, "billed_units": {"search_units": 1}},
        },
        separators=(",", ":"),
    )


def image_answer():
    raw = bytes((i * 131 % 251) for i in range(IMAGE_BYTES))
    b64 = base64.b64encode(raw).decode("ascii")
    return (
        '{"created":1700000000,"data":[{"b64_json":"' + b64 + '"}],"output_format":"png",'
        '"size":"1024x1024","quality":"medium","usage":{"input_tokens":50,'
        '"input_tokens_details":{"image_tokens":0,"text_tokens":50},"output_tokens":1056,"total_tokens":1106}}'
    )


IMAGE_BODY = (
    '{"model":"@MODEL@","prompt":"a watercolor painting of a red fox in the snow",'
    '"size":"1024x1024","response_format":"b64_json"}'
)

NGINX_ROUTES = f"""        {MARK}: 100 rerank results, one GPT image inline
        location = /big/v2/rerank {{ error_page 405 =200 /_static/rerank-100.json; return 405; }}
        location = /big/v1/images/generations {{ error_page 405 =200 /_static/image-b64-big.json; return 405; }}
        location = /_static/rerank-100.json {{ internal; alias @PEERS@/fake/static/rerank-100.json; default_type application/json; }}
        location = /_static/image-b64-big.json {{ internal; alias @PEERS@/fake/static/image-b64-big.json; default_type application/json; }}
"""

MAKE_BODY = f"""    {MARK}
    rerank_100|image_b64_big) sed "s|@MODEL@|$model|" "$PEERS/bodies/$ep.json.in" ;;
"""

VERIFY = f"""    {MARK}
    rerank_100) [ "$code" = 200 ] && [ "$(grep -o '"relevance_score"' "$out" | wc -l)" = 100 ] && ok=ok ;;
    image_b64_big) [ "$code" = 200 ] && grep -q '"b64_json"' "$out" && [ "$size" -gt 1572864 ] && ok=ok ;;
"""


def insert_before(text, anchor, addition, what):
    if text.count(anchor) != 1:
        sys.exit(f"big_bodies.py: {what}: expected one line {anchor.strip()!r}; the harness has changed")
    return text.replace(anchor, addition + anchor)


def main():
    peers = Path(sys.argv[1])
    nginx = peers / "fake" / "nginx.conf"
    runner = peers / "run-peers.sh"
    conf, script = nginx.read_text(), runner.read_text()
    if MARK in conf and MARK in script:
        print("big_bodies.py: already prepared")
        return
    conf = insert_before(conf, "        location = /health { return 200 'ok'; }\n", NGINX_ROUTES, "fake/nginx.conf")
    # make_body's `case` ends with `  esac > "$f"`; verify's is the only other `  esac` before its log line.
    script = insert_before(script, '  esac > "$f"\n', MAKE_BODY, "run-peers.sh make_body")
    script = insert_before(script, '  esac\n  log "verify', VERIFY, "run-peers.sh verify")
    static = peers / "fake" / "static"
    (static / "rerank-100.json").write_text(rerank_answer())
    (static / "image-b64-big.json").write_text(image_answer())
    bodies = peers / "bodies"
    (bodies / "rerank_100.json.in").write_text(rerank_body())
    (bodies / "image_b64_big.json.in").write_text(IMAGE_BODY)
    nginx.write_text(conf)
    runner.write_text(script)
    print(f"big_bodies.py: rerank_100 ({len(rerank_body())} bytes in) and image_b64_big added")


if __name__ == "__main__":
    main()
