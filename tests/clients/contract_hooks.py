"""Schemathesis hooks of the contract test (loaded through SCHEMATHESIS_HOOKS).

One custom check: the gateway's only acceptable server errors here are the documented 503s
(`model_unavailable` for models whose provider has no key, `store_unavailable`) and `GET
/api/v1/usage`'s documented 501 `not_configured` (the gateway under test has no usage ledger).
Any other 5xx (500 `internal_error`, 502 or 504 from a fake provider that always answers well) is
a bug.
"""

import json
import os

import schemathesis

ACCEPTED_503 = {"model_unavailable", "store_unavailable"}


@schemathesis.check
def only_documented_unavailability(ctx, response, case):
    status = response.status_code
    if status < 500:
        return None
    code = None
    try:
        code = json.loads(response.content).get("code")
    except (ValueError, AttributeError):
        pass
    if status == 503 and code in ACCEPTED_503:
        return None
    if status == 501 and code == "not_configured" and case.operation.label == "GET /api/v1/usage":
        return None
    raise AssertionError(f"server error {status} `{code}` (only 503 model_unavailable/store_unavailable are expected): {response.content[:300]!r}")


@schemathesis.check
def tally_answers(ctx, response, case):
    """Not a check: records each answer's operation, status, code and request media type in
    $CONTRACT_TALLY, so the test can tell the run reached the providers (with each kind of body)
    and the documented 503s."""
    path = os.environ.get("CONTRACT_TALLY")
    if not path:
        return None
    try:
        code = json.loads(response.content).get("code", "")
    except (ValueError, AttributeError):
        code = ""
    with open(path, "a") as f:
        f.write(f"{case.operation.label}\t{response.status_code}\t{code}\t{case.media_type or ''}\n")
    return None
