"""Standard Webhooks signatures (https://www.standardwebhooks.com/): the
headers of one delivery attempt, signed with the engine's secret by the
`standardwebhooks` package (HMAC-SHA256 over "id.timestamp.body")."""

from __future__ import annotations

from datetime import datetime

from standardwebhooks import Webhook


def load_secret(secret: str) -> Webhook:
    """The signer for a `whsec_<base64>` secret; ValueError when it is not one."""
    if not secret.startswith("whsec_"):
        raise ValueError("the webhook secret must be whsec_ followed by base64")
    try:
        signer = Webhook(secret)
    except Exception as exc:  # binascii.Error, the package's empty-secret error
        raise ValueError(f"the webhook secret is not valid base64: {exc}") from exc
    return signer


def signed_headers(signer: Webhook, webhook_id: str, at: datetime, body: str) -> dict[str, str]:
    """The attempt's headers: the same webhook-id on every attempt (receivers
    dedupe on it), the attempt's own timestamp, and the signature of both
    with the body."""
    return {
        "content-type": "application/json",
        "webhook-id": webhook_id,
        "webhook-timestamp": str(int(at.timestamp())),
        "webhook-signature": signer.sign(webhook_id, at, body),
    }
