"""UTC timestamps: timezone-aware in Python and in the databases, Timestamp on the wire."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from google.protobuf.duration_pb2 import Duration
from google.protobuf.timestamp_pb2 import Timestamp

from services.shared.errors import InvalidArgument


def _system_clock() -> datetime:
    return datetime.now(UTC)


_clock: Callable[[], datetime] = _system_clock


def utcnow() -> datetime:
    """Now, from the process's clock: the system's, unless a test replaced it
    (:func:`set_clock`) to move time forward without waiting for it."""
    return _clock()


def set_clock(clock: Callable[[], datetime] | None) -> None:
    """A test seam: ``clock`` answers every :func:`utcnow` of this process
    (None: the system clock again). Services never call it."""
    global _clock
    _clock = clock or _system_clock


def aware(value: datetime) -> datetime:
    """SQLite hands back naive datetimes; every time stored here is UTC."""
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def to_timestamp(value: datetime | None) -> Timestamp | None:
    if value is None:
        return None
    stamp = Timestamp()
    stamp.FromDatetime(aware(value))
    return stamp


def from_timestamp(stamp: Timestamp, field: str) -> datetime:
    """A request's Timestamp, timezone-aware; INVALID_ARGUMENT when it is not
    a time (nanos outside [0, 1e9), seconds outside years 1-9999)."""
    try:
        return stamp.ToDatetime(tzinfo=UTC)
    except (ValueError, OverflowError) as exc:
        raise InvalidArgument(f"{field} is not a valid time: {exc}", field=field) from exc


def from_duration(duration: Duration, field: str) -> timedelta:
    """A request's Duration; INVALID_ARGUMENT when Python cannot hold it."""
    try:
        return duration.ToTimedelta()
    except (ValueError, OverflowError) as exc:
        raise InvalidArgument(f"{field} is not a valid duration: {exc}", field=field) from exc
