"""A refusal that quotes a long client input still fits gRPC's trailers: the
message and the quoted metadata are cut, so the caller gets the refusal, not
RESOURCE_EXHAUSTED "Stream removed"."""

from __future__ import annotations

from services.shared.errors import MAX_MESSAGE_CHARS, MAX_METADATA_CHARS, NotFound, to_status


def test_a_refusal_quoting_a_huge_input_fits_the_trailers() -> None:
    huge = "x" * 20_000
    status = to_status(NotFound(f"agent {huge!r} not found", agent_id=huge))
    trailers = sum(len(key) + len(value) for key, value in status.trailing_metadata)
    assert trailers < 8192 - 1024, trailers  # room left for gRPC's own headers
    assert len(status.details) == MAX_MESSAGE_CHARS and status.details.endswith("…")
    short = to_status(NotFound("agent 'ops' not found", agent_id="ops"))
    assert short.details == "agent 'ops' not found"  # short messages are untouched
    assert MAX_METADATA_CHARS < MAX_MESSAGE_CHARS
