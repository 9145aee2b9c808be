"""The import graph of services/, gateway/ and client/: no cycles, and no
service that reaches into another's internals.

Every import counts, at module level or inside a function or an
``if TYPE_CHECKING:`` block: a cycle broken only at run time is still two
modules that cannot be understood, tested or moved one without the other.
A service (``services/<name>/``), the gateway and the terminal client
(``client/``) may import ``services.shared``, the generated contracts
(``switchboard.*``) and their own package; another service is reached only
through its gRPC contract (the client: through the HTTP API). ``services.shared``
imports nothing but itself. The health probe imports no service either; the
local launcher, which starts every process, is the one module allowed to use
a service's code (it writes the gateway's development tokens with the
gateway's own code). The other exceptions are listed, edge by edge, in
``ALLOWED``."""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("services", "gateway", "client")
SHARED = "services.shared"
LAUNCHER = "services.launcher"

# Edges across a boundary that are there on purpose, each with why. Listed
# exactly: a new crossing fails, and so does a listed one once it is gone.
ALLOWED: dict[tuple[str, str], str] = {
    # The gateway's /mcp serves the terminal client's MCP tools in-process,
    # each over an Api with the request's token: the stdio and HTTP
    # transports are one implementation, with the HTTP API's checks.
    ("gateway.mcp_server", "client.api"): "one MCP implementation for both transports",
    ("gateway.mcp_server", "client.mcp_tools"): "one MCP implementation for both transports",
}

# Cycles allowed to exist: none. Listed exactly, so that a new cycle fails
# and so does a listed one once it is gone.
KNOWN_CYCLES: set[frozenset[str]] = set()


def _modules() -> dict[str, Path]:
    modules = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join(parts)] = path
    return modules


def _imported(module: str, path: Path, modules: dict[str, Path]) -> Iterator[str]:
    """The modules of ours that ``module`` imports (the nearest enclosing
    module for ``from package import name``)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            names = [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        for name in names:
            while name not in modules and "." in name:
                name = name.rpartition(".")[0]
            if name in modules and name != module:
                yield name


def import_graph() -> dict[str, set[str]]:
    modules = _modules()
    return {module: set(_imported(module, path, modules)) for module, path in modules.items()}


def cycles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """Strongly connected components of more than one module (Tarjan's
    algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            step = next(edges, None)
            if step is not None:
                if step not in index:
                    index[step] = low[step] = len(index)
                    stack.append(step)
                    on_stack.add(step)
                    work.append((step, iter(sorted(graph[step]))))
                elif step in on_stack:
                    low[node] = min(low[node], index[step])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(frozenset(component))
    return found


def owner(module: str) -> str:
    """The package a module belongs to: ``services.<name>``, ``gateway`` or
    ``client``."""
    parts = module.split(".")
    return parts[0] if parts[0] != "services" else ".".join(parts[:2])


def boundary_violations(
    graph: dict[str, set[str]], allowed: Iterable[tuple[str, str]] = ALLOWED
) -> list[str]:
    """Every import of another package's module but ``services.shared``'s
    (for ``services.shared`` itself: of anything outside it), apart from the
    launcher's and the ``allowed`` edges."""
    wrong = []
    exceptions = set(allowed)
    for module, imported in sorted(graph.items()):
        if module == LAUNCHER:
            continue
        for target in sorted(imported):
            if owner(target) not in (owner(module), SHARED) and (module, target) not in exceptions:
                wrong.append(f"{module} imports {target}")
    return wrong


def test_the_graph_is_read_whole() -> None:
    graph = import_graph()
    assert "services.shared.handlers" in graph["services.shared.errors"]
    assert "services.memory.notes.domain" in graph["services.memory.context.domain"]
    assert {"gateway.app", "services.threads.server", "services.memory.server"} <= set(graph)


def test_no_import_cycles() -> None:
    found = set(cycles(import_graph()))
    assert found - KNOWN_CYCLES == set(), "import cycles: " + "; ".join(
        " <-> ".join(sorted(c)) for c in found - KNOWN_CYCLES
    )
    assert KNOWN_CYCLES - found == set(), "gone, delete from KNOWN_CYCLES: " + "; ".join(
        " <-> ".join(sorted(c)) for c in KNOWN_CYCLES - found
    )


def test_cycles_are_found_through_any_path() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"d"}}
    assert cycles(graph) == [frozenset({"a", "b", "c"})]


def test_no_service_imports_another_services_internals() -> None:
    assert boundary_violations(import_graph()) == []


def test_every_listed_exception_is_still_an_import() -> None:
    graph = import_graph()
    gone = [f"{module} -> {target}" for module, target in ALLOWED if target not in graph.get(module, set())]
    assert gone == [], "gone, delete from ALLOWED: " + "; ".join(gone)


def test_the_client_and_the_write_guard_are_in_the_graph() -> None:
    graph = import_graph()
    assert "services.shared.write_guard" in graph["client.mcp_tools"]
    assert "services.shared.write_guard" in graph["services.engine.tools.policy"]


def test_a_reach_into_another_service_is_caught() -> None:
    graph = {
        "services.engine.collaborators": {"services.memory.servicer", "services.shared.clients"},
        "services.shared.clients": {"services.threads.models"},
        "gateway.app": {"services.router.settings"},
        "services.launcher": {"gateway.tokens"},
        "services.healthcheck": {"services.engine.settings"},
        "client.mcp_tools": {"services.engine.write_guard", "services.shared.write_guard", "client.api"},
        "client.cli": {"gateway.tokens"},
        "gateway.mcp_server": {"client.api", "client.mcp_tools", "client.cli"},
        "gateway.api": {"client.api"},
    }
    assert boundary_violations(graph) == [
        "client.cli imports gateway.tokens",
        "client.mcp_tools imports services.engine.write_guard",
        "gateway.api imports client.api",
        "gateway.app imports services.router.settings",
        "gateway.mcp_server imports client.cli",
        "services.engine.collaborators imports services.memory.servicer",
        "services.healthcheck imports services.engine.settings",
        "services.shared.clients imports services.threads.models",
    ]
