"""An agent's provider pin checked against the router's configured models
before the registry stores it: a pin no configured model can serve, or a
model of another provider than the pinned one, would only fail at the
agent's next ask (the engine runs a pinned agent on its provider alone), so
the client hears it now, as a 400 that names what would work."""

from __future__ import annotations

from fastapi import Request

from gateway.catalog import configured_models
from gateway.errors import ApiError


async def check_provider_pin(request: Request, user: str, provider_id: str, model: str) -> None:
    """400 when ``provider_id`` serves none of the configured models, or
    ``model`` (a configured id) is another provider's. Unpinned ("") agents
    and Auto are not checked here."""
    if not provider_id:
        return
    models = await configured_models(request, user)
    providers = list(dict.fromkeys(m.provider for m in models))
    if provider_id not in providers:
        raise ApiError(
            400,
            "INVALID_ARGUMENT",
            f"provider_id: {provider_id!r} serves none of the configured models; "
            f"the providers are: {', '.join(providers)}",
        )
    chosen = next((m for m in models if m.id == model), None)
    if chosen is not None and chosen.provider != provider_id:
        raise ApiError(
            400,
            "INVALID_ARGUMENT",
            f"model: {model!r} is served by provider {chosen.provider!r}, not by the pinned provider "
            f"{provider_id!r}; choose one of its models or auto, or change provider_id",
        )
