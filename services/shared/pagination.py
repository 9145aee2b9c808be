"""Opaque page tokens: clients pass them back unchanged and never parse them."""

from __future__ import annotations

import base64
import json
from typing import Any

from services.shared.errors import InvalidArgument

DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 500


def page_size(requested: int) -> int:
    if requested < 0:
        raise InvalidArgument("page_size must not be negative", field="page_size")
    return min(requested or DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE)


def encode_token(cursor: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(cursor, separators=(",", ":")).encode()).decode()


def decode_token(token: str) -> dict[str, Any]:
    if not token:
        return {}
    try:
        cursor = json.loads(base64.urlsafe_b64decode(token.encode()))
    except ValueError as exc:
        raise InvalidArgument("page_token is not a token this service issued", field="page_token") from exc
    if not isinstance(cursor, dict):
        raise InvalidArgument("page_token is not a token this service issued", field="page_token")
    return cursor
