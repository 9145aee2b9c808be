"""An agent CLI asks another agent through Switchboard's stdio MCP server.

The engine runs agent "dev-cli" on a CLI provider: the fake headless agent
CLI (tests/fakes/agent_cli.py), configured with an MCP config in Claude
Code's ``.mcp.json`` shape naming ``python -m client mcp`` (the
``switchboard mcp`` console script) with the gateway's URL, a user's token
and SWITCHBOARD_AGENT=dev-cli. Asked to ask "qa-cli", the CLI starts the MCP
server with the SDK's client and calls ask_agent: the question and its
answer land on qa-cli's thread with dev-cli as the requester and the
correlation id the CLI gave, and dev-cli's answer carries qa-cli's."""

from __future__ import annotations

import json
import os
import sys
import uuid
from pathlib import Path

import pytest

from tests.e2e.conftest import CLI_AGENT_MCP_CONFIG, Launched, recording_env, shared_recording
from tests.e2e.sse import read_events

ROOT = Path(__file__).resolve().parents[2]
# The system of the recording modules, whose engine has the fake agent CLI
# as the model `agent-model`, configured with this MCP configuration.
LAUNCH_ENV = recording_env(f"{shared_recording().url}/v1")
MCP_CONFIG = CLI_AGENT_MCP_CONFIG


@pytest.fixture(scope="module")
def mcp_config(launched: Launched) -> Path:
    config = {
        "mcpServers": {
            "switchboard": {
                "command": sys.executable,
                "args": ["-m", "client", "mcp"],
                "env": {
                    "PATH": os.environ.get("PATH", ""),
                    "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'gen'}",
                    "SWITCHBOARD_URL": launched.url,
                    "SWITCHBOARD_TOKEN": launched.token("alice"),
                    "SWITCHBOARD_AGENT": "dev-cli",
                },
            }
        }
    }
    MCP_CONFIG.write_text(json.dumps(config), encoding="utf-8")
    return MCP_CONFIG


@pytest.mark.parametrize(
    "question", ["Le build de la branche principale est-il vert ?", "Is the main branch's build green?"]
)
def test_a_cli_agent_asks_another_agent_through_the_stdio_mcp_server(
    launched: Launched, mcp_config: Path, question: str
) -> None:
    with launched.client(timeout=120) as alice:
        for agent, model in (("dev-cli", "agent-model"), ("qa-cli", "offline-balanced")):
            created = alice.post("/api/agent/agents", json={"id": agent, "model": model})
            assert created.status_code == 201, created.text
        correlation = f"cli-{uuid.uuid4().hex[:8]}"
        body = {"message": f"ask qa-cli ({correlation}): {question}", "requester": "user"}
        with alice.stream("POST", "/api/agent/agents/dev-cli/asks", json=body) as response:
            assert response.status_code == 200, response.read()
            events = list(read_events(response))
        final = events[-1]
        assert final.event == "final", events
        assert final.data["text"].startswith("qa-cli answered: ") and len(final.data["text"]) > 20

        # On qa-cli's thread: the CLI agent's question and qa-cli's answer,
        # with dev-cli as the requester and the CLI's correlation id.
        view = alice.get("/api/agent/agents/qa-cli/entries", params={"correlation_id": correlation}).json()
        entries = view["entries"]
        assert [e["role"] for e in entries] == ["user", "assistant"], entries
        assert {e["requester"] for e in entries} == {"dev-cli"}
        assert {e["correlation_id"] for e in entries} == {correlation}
        assert entries[0]["content"] == question
        assert final.data["text"] == f"qa-cli answered: {entries[1]['content']}"
        pair = alice.get("/api/agent/agents/qa-cli/entries", params={"requester": "dev-cli"}).json()
        assert correlation in {e["correlation_id"] for e in pair["entries"]}
