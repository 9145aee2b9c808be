"""The identity key of a test or benchmark run: the services started in this
process, the processes it launches (they inherit its environment) and its own
calls (user_metadata) all sign and verify with it. The environment's key
when it sets one, else a new one per run."""

from __future__ import annotations

import os
import secrets

from services.shared.identity_tokens import configure
from services.shared.settings import SecuritySettings


def use_run_identity_key() -> None:
    if not os.environ.get("SWITCHBOARD_IDENTITY_KEY_FILE"):
        os.environ.setdefault("SWITCHBOARD_IDENTITY_KEY", "tests-" + secrets.token_urlsafe(32))
    configure(SecuritySettings().identity_tokens())
