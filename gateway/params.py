"""Path, query and header parameters, checked at the edge for length and
characters before any service is called: a malformed one is 400 with the
parameter named; a well-formed id that names nothing stays 404 (the service's
answer). Every string parameter of the API uses one of these types
(tests/unit/test_gateway_params.py checks that against the OpenAPI schema)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Header, Path, Query

from services.shared.pagination import MAX_PAGE_SIZE

# The ids the services make (UUIDs, slugs like an agent's id): letters,
# digits and . _ : - , starting with a letter or digit.
ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:-]*$"
ID_MAX = 128
# A page token is the services' URL-safe base64 cursor.
TOKEN_PATTERN = r"^[A-Za-z0-9_=+/.:-]*$"
# Text a person typed (a search, a name, a selection): anything but the
# control characters other than tab and line breaks.
TEXT_PATTERN = r"^[^\x00-\x08\x0b\x0c\x0e-\x1f\x7f]*$"

Id = Annotated[str, Path(min_length=1, max_length=ID_MAX, pattern=ID_PATTERN)]
# A name chosen by the caller (a live-state agent name): one line of text.
Name = Annotated[str, Path(min_length=1, max_length=ID_MAX, pattern=r"^[^\x00-\x1f\x7f]+$")]
# A listing route's paging, passed on to its List RPC: the service applies the
# size's default and reads the token; a size above the services' bound or a
# malformed token is refused here.
PageSize = Annotated[int, Query(ge=0, le=MAX_PAGE_SIZE)]
PageToken = Annotated[str, Query(max_length=2000, pattern=TOKEN_PATTERN)]
# The project a project-scoped route acts in ("": the caller's personal
# project); a project the caller is not a member of is 404.
ProjectId = Annotated[str, Query(max_length=128, pattern=r"^[A-Za-z0-9._-]*$")]
# The run event sequence a client resumes after (SSE ids are int64 sequences).
LastEventId = Annotated[str, Header(max_length=18, pattern=r"^[0-9]*$")]


def optional_id(**extra: Any) -> Any:
    """A query parameter holding an id, or "" for none."""
    return Query(max_length=ID_MAX, pattern=f"^$|{ID_PATTERN}", **extra)


def text(max_length: int, **extra: Any) -> Any:
    """A query parameter of free text up to ``max_length`` characters."""
    return Query(max_length=max_length, pattern=TEXT_PATTERN, **extra)
