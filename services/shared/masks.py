"""Update masks (``google.protobuf.FieldMask``), read the same way by every
Update RPC: the mask names the fields to write, and only those are written."""

from __future__ import annotations

from collections.abc import Collection, Sequence

from services.shared.errors import InvalidArgument


def masked_fields(paths: Sequence[str], updatable: Collection[str]) -> list[str]:
    """The fields ``paths`` names, each once, in the order given. A mask that
    names no field, or a field outside ``updatable`` (unknown or read-only),
    is INVALID_ARGUMENT on ``update_mask``, and nothing is written."""
    if not paths:
        raise InvalidArgument("update_mask must name at least one field", field="update_mask")
    unknown = sorted(set(paths) - set(updatable))
    if unknown:
        raise InvalidArgument(
            f"update_mask has unknown or read-only paths {unknown}; allowed: {sorted(updatable)}",
            field="update_mask",
        )
    return list(dict.fromkeys(paths))
