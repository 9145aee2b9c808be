"""The sources catalogue: the connectors and MCP servers this engine is
configured with, which a conversation can allow besides its workspace and
memory. Built from the very objects the tool registry is given, so a client
offers exactly what runs honour; names and titles only (a server's command,
arguments and environment, which may hold keys, stay here)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from services.engine.tools.connectors import Connector
from services.engine.tools.mcp_client import McpServerConfig
from services.shared.pagination import by_offset, offset_token, page_request


@dataclass(frozen=True)
class ConfiguredSource:
    kind: Literal["connector", "mcp_server"]
    # Its name in a conversation's allowed sources.
    name: str
    # What users see: the configured title, else the name.
    title: str


class SourceCatalogue:
    """Connectors first, then MCP servers, each in configuration order."""

    def __init__(self, connectors: Iterable[Connector], servers: Iterable[McpServerConfig]) -> None:
        self.sources = (
            *(ConfiguredSource("connector", c.name, c.title or c.name) for c in connectors),
            *(ConfiguredSource("mcp_server", s.name, s.title or s.name) for s in servers),
        )

    def page(self, requested_size: int, token: str) -> tuple[tuple[ConfiguredSource, ...], str]:
        """One page, and the next page's token ("" on the last)."""
        size, start = page_request(requested_size, token, by_offset)
        start = start or 0
        return self.sources[start : start + size], offset_token(start + size, len(self.sources))
