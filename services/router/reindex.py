"""``python -m services.router reindex``: stores a vector of the configured
embedder (``SWITCHBOARD_ROUTER_EMBEDDER``) for every catalog skill that has
none, in batches, with progress, resumable. The service also does it in the
background (``reindex_in_background``); until it is done, routing is
lexical only and each decision record says so."""

from __future__ import annotations

from collections.abc import Sequence

from services.router.settings import RouterSettings
from services.shared.rebuild import ProgressLine, command


async def _run(settings: RouterSettings) -> int:
    from services.router.server import open_domain

    domain, closers = await open_domain(settings.model_copy(update={"reindex_in_background": False}))
    try:
        return await domain.reindex(ProgressLine(f"skills, {settings.embedder.value}"))
    finally:
        for close in reversed(closers):
            await close()


def main(argv: Sequence[str]) -> int:
    return command(argv, "python -m services.router reindex", __doc__, lambda: _run(RouterSettings()))
