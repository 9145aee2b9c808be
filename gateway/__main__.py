"""python -m gateway: serves the ASGI app with uvicorn.
python -m gateway tokens create|list|revoke|role: manages the hashed tokens file."""

from __future__ import annotations

import sys


def main() -> None:
    if sys.argv[1:2] == ["tokens"]:
        # The token commands need none of the web app: importing it (FastAPI,
        # the MCP SDK, the database layer) would triple their start-up.
        from gateway import tokens

        sys.exit(tokens.main(sys.argv[2:]))
    serve()


def serve() -> None:
    import uvicorn

    from gateway.app import create_app
    from gateway.settings import GatewaySettings
    from services.shared import exit_codes
    from services.shared.identity_tokens import IdentityKeyError
    from services.shared.telemetry import setup_logging, setup_telemetry

    settings = GatewaySettings()
    setup_logging(settings.log_level, "gateway")
    setup_telemetry("gateway", settings.otlp_endpoint)
    try:
        app = create_app(settings)
    except IdentityKeyError as error:
        print(f"gateway cannot start: {error}", file=sys.stderr)
        sys.exit(exit_codes.BAD_IDENTITY_KEY)
    uvicorn.run(
        app,
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level.lower(),
        access_log=False,
        timeout_graceful_shutdown=10,
    )


if __name__ == "__main__":
    main()
