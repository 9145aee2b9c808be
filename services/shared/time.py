"""UTC timestamps: timezone-aware in Python and in the databases, Timestamp on the wire."""

from __future__ import annotations

from datetime import UTC, datetime

from google.protobuf.timestamp_pb2 import Timestamp


def utcnow() -> datetime:
    return datetime.now(UTC)


def to_timestamp(value: datetime | None) -> Timestamp | None:
    if value is None:
        return None
    stamp = Timestamp()
    stamp.FromDatetime(value if value.tzinfo else value.replace(tzinfo=UTC))
    return stamp
