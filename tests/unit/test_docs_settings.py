"""docs/operations.md names every environment variable every process reads,
so the documentation cannot silently fall behind a new setting. The names are
computed from the settings classes themselves (env prefix + field name, or
the field's validation aliases), not listed by hand."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import AliasChoices
from pydantic_settings import BaseSettings

from client.settings import ClientSettings
from gateway.settings import GatewaySettings
from services.engine.settings import EngineSettings
from services.memory.settings import MemorySettings
from services.router.settings import RouterSettings
from services.threads.settings import ThreadsSettings

OPERATIONS = Path(__file__).resolve().parents[2] / "docs" / "operations.md"
SETTINGS: list[type[BaseSettings]] = [
    EngineSettings,
    RouterSettings,
    ThreadsSettings,
    MemorySettings,
    GatewaySettings,
    ClientSettings,
]
# Internal: names the SQLite file, the version table and the trace service.
UNDOCUMENTED_FIELDS = {"service_name"}


def environment_names(settings: type[BaseSettings]) -> set[str]:
    """Every variable name the class reads a field from."""
    prefix = str(settings.model_config.get("env_prefix", ""))
    names: set[str] = set()
    for field_name, field in settings.model_fields.items():
        if field_name in UNDOCUMENTED_FIELDS:
            continue
        alias = field.validation_alias
        if isinstance(alias, AliasChoices):
            names |= {choice.upper() for choice in alias.choices if isinstance(choice, str)}
        elif isinstance(alias, str):
            names.add(alias.upper())
        else:
            names.add(f"{prefix}{field_name}".upper())
    return names


def test_the_names_are_computed_from_the_classes() -> None:
    engine = environment_names(EngineSettings)
    assert {"SWITCHBOARD_ENGINE_PORT", "SWITCHBOARD_DATA_DIR", "OTEL_EXPORTER_OTLP_ENDPOINT"} <= engine
    assert "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT" in engine
    assert "SWITCHBOARD_ENGINE_SERVICE_NAME" not in engine
    assert "SWITCHBOARD_GATEWAY_TOKENS" in environment_names(GatewaySettings)


@pytest.mark.parametrize("settings", SETTINGS, ids=lambda s: s.__name__)
def test_operations_md_documents_every_environment_variable(settings: type[BaseSettings]) -> None:
    text = OPERATIONS.read_text(encoding="utf-8")
    missing = sorted(name for name in environment_names(settings) if f"`{name}`" not in text)
    assert not missing, f"docs/operations.md does not document {missing} ({settings.__name__})"
