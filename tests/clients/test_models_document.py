"""`GET /api/v1/models` against the OpenAPI document, for every built-in capability family: a model
of each family is configured, and the list the gateway answers must validate against the
document's `ModelList` schema (whose capability objects allow no undocumented key). The contract
test checks the few models of its own configuration; this one covers every family's shape."""

import json
import urllib.request
from pathlib import Path

import jsonschema
import yaml

from conftest import API_KEY

ROOT = Path(__file__).resolve().parents[2]
FAMILIES = ROOT / "src" / "caps" / "families.yaml"
DOCUMENT = ROOT / "openapi" / "openapi.json"

PROVIDERS = (
    '    openai: {kind: openai, api_key: "sk-x", base_url: "{fake}/v1"}\n'
    '    cohere: {kind: cohere, api_key: "", base_url: "{fake}"}\n'
)


def families() -> dict[str, str]:
    """Each family's name and operation (inherited through `extends`)."""
    table = yaml.safe_load(FAMILIES.read_text())
    entries = {**table.get("templates", {}), **table["families"]}

    def operation(name: str) -> str:
        entry = entries[name]
        return entry.get("operation") or operation(entry["extends"])

    return {name: operation(name) for name in table["families"]}


def test_every_family_is_listed_as_the_document_says(gateway, fake):
    fams = families()
    # Only the operation decides which provider kinds may serve a model.
    models = "".join(
        f"    m-{name}: {{family: {name}, targets: "
        f"[{{provider: {'cohere' if op == 'rerank' else 'openai'}, model: x}}]}}\n"
        for name, op in fams.items()
    )
    gw = gateway(fake, providers=PROVIDERS, models=models)
    req = urllib.request.Request(gw.base + "/models", headers={"Authorization": f"Bearer {API_KEY}"})
    with urllib.request.urlopen(req, timeout=5) as r:
        body = json.loads(r.read())
    doc = json.loads(DOCUMENT.read_text())
    schema = {"$ref": "#/components/schemas/ModelList", "components": doc["components"]}
    jsonschema.Draft202012Validator(schema).validate(body)
    listed = {m["id"]: m for m in body["data"]}
    for name, op in fams.items():
        m = listed[f"m-{name}"]
        assert (m["family"], m["operation"]) == (name, op)
        # The rerank provider has no key: listed, and said to be unavailable.
        assert m["available"] is (op != "rerank"), name
    assert fake.requests == []
