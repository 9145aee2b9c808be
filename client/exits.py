"""The exit codes of ``switchboard``, one table for every command, so a
script can tell a mistake of its own from a missing object and from a
server that failed (docs/clients.md, "Exit codes")."""

from __future__ import annotations

from client.api import ApiRefusal

OK = 0
RUN_FAILED = 1  # the run started, then ended with an error event (failed, cancelled, budget)
USAGE = 2  # bad arguments or settings: refused by the command line or by the API (400, 413)
NOT_FOUND = 3  # the agent, run, conversation... does not exist, or is another user's (404)
DENIED = 4  # no valid token, or not allowed (401, 403)
CONFLICT = 5  # the object's state refuses it, or too many requests (409, 429): retry or re-read
SERVER = 6  # the server failed or could not be reached (5xx, a network error)
INTERRUPTED = 130  # Ctrl-C


def for_refusal(refusal: ApiRefusal) -> int:
    """The exit code of an API refusal, by its HTTP status."""
    status = refusal.status
    if status == 404:
        return NOT_FOUND
    if status in (401, 403):
        return DENIED
    if status in (409, 429):
        return CONFLICT
    if 400 <= status < 500:
        return USAGE
    return SERVER
