"""Webhook signatures against the Standard Webhooks specification's own
example, and the headers of one attempt."""

from __future__ import annotations

import base64
import hashlib
import hmac
from datetime import UTC, datetime

import pytest
from standardwebhooks import Webhook

from services.engine.webhooks.signing import load_secret, signed_headers
from services.engine.webhooks.worker import body_of

# The specification's published example (standard-webhooks, spec/standard-webhooks.md).
SPEC_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
SPEC_ID = "msg_p5jXN8AQM9LWM0D4loKWxJek"
SPEC_TIMESTAMP = 1614265330
SPEC_BODY = '{"test": 2432232314}'
SPEC_SIGNATURE = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="


def test_the_signature_matches_the_specification_example() -> None:
    at = datetime.fromtimestamp(SPEC_TIMESTAMP, UTC)
    headers = signed_headers(load_secret(SPEC_SECRET), SPEC_ID, at, SPEC_BODY)
    assert headers["webhook-id"] == SPEC_ID
    assert headers["webhook-timestamp"] == str(SPEC_TIMESTAMP)
    assert headers["webhook-signature"] == SPEC_SIGNATURE
    assert headers["content-type"] == "application/json"


def test_the_signature_is_hmac_sha256_over_id_timestamp_and_body() -> None:
    at = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
    body = body_of({"id": "r1", "status": "RUN_STATUS_DONE"}, at)
    headers = signed_headers(load_secret(SPEC_SECRET), "msg_r1", at, body)
    key = base64.b64decode(SPEC_SECRET.removeprefix("whsec_"))
    signed = f"msg_r1.{int(at.timestamp())}.{body}".encode()
    expected = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
    assert headers["webhook-signature"] == f"v1,{expected}"


def test_a_receiver_verifies_a_fresh_attempt_with_the_library() -> None:
    at = datetime.now(UTC)
    body = body_of({"id": "r2", "status": "RUN_STATUS_FAILED", "error": "échec — 失败"}, at)
    headers = signed_headers(load_secret(SPEC_SECRET), "msg_r2", at, body)
    payload = Webhook(SPEC_SECRET).verify(body.encode(), headers)
    assert payload["type"] == "run.ended" and payload["data"]["run"]["error"] == "échec — 失败"
    assert payload["timestamp"] == at.isoformat().replace("+00:00", "Z")


@pytest.mark.parametrize(
    "secret", ["", "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_", "whsec_%%%not-base64%%%"]
)
def test_a_bad_secret_is_refused(secret: str) -> None:
    with pytest.raises(ValueError, match="secret"):
        load_secret(secret)
