"""Which tests one pytest-xdist worker runs as a whole, under ``--dist
loadgroup`` (what scripts/test.sh asks for).

A group is a module, except that the e2e modules with the same launch
settings (their ``LAUNCH_ENV``) form one group: one worker runs them back to
back on one launched system, where whole modules alone would let each worker
launch its own.

xdist's own loadgroup scheduler would do this from ``xdist_group`` marks,
but with pytest 9.2 the marks are silently ignored (pytest-dev/pytest-xdist#1386:
it appends the group to node ids that pytest no longer lets it change). So
each worker, which imports the modules, writes the group of every test it
collected to a file the controller named, and the controller's scheduler
reads it when it splits the work: this scheduler replaces xdist's for
``--dist loadgroup``."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import pytest
from xdist.scheduler import LoadScopeScheduling

GROUPS_FILE = "switchboard_groups_file"


def worker_group(item: pytest.Item) -> str:
    module = getattr(item, "module", None)
    if "launched" in getattr(item, "fixturenames", ()):
        settings = json.dumps(sorted(getattr(module, "LAUNCH_ENV", {}).items()))
        return "launch-" + hashlib.sha256(settings.encode()).hexdigest()[:12]
    return item.nodeid.split("::", 1)[0]


class GroupScheduling(LoadScopeScheduling):
    """Whole groups per worker, in collection order."""

    def __init__(self, config: pytest.Config, log: Any, groups_file: Path) -> None:
        super().__init__(config, log)
        self._groups_file = groups_file
        self._groups: dict[str, str] | None = None

    def _split_scope(self, nodeid: str) -> str:
        # Called once every worker has collected, so the file is written.
        if self._groups is None:
            self._groups = json.loads(self._groups_file.read_text()) if self._groups_file.exists() else {}
        return self._groups.get(nodeid) or nodeid.split("::", 1)[0]


class WorkerGroups:
    """Registered by tests/conftest.py on the controller and on each worker."""

    def __init__(self) -> None:
        self._file = Path(tempfile.gettempdir()) / f"switchboard-groups-{os.getpid()}.json"

    def pytest_configure_node(self, node: Any) -> None:
        node.workerinput[GROUPS_FILE] = str(self._file)

    @pytest.hookimpl(tryfirst=True)
    def pytest_xdist_make_scheduler(self, config: pytest.Config, log: Any) -> LoadScopeScheduling | None:
        if config.getvalue("dist") != "loadgroup":
            return None
        return GroupScheduling(config, log, self._file)

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        if not hasattr(config, "workerinput"):
            self._file.unlink(missing_ok=True)


def write_groups(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On a worker: every collected test's group, for the controller. Every
    worker collects the same tests, so each writes the same content (the
    write is atomic: a rename)."""
    target = getattr(config, "workerinput", {}).get(GROUPS_FILE)
    if not target:
        return
    content = json.dumps({item.nodeid: worker_group(item) for item in items})
    partial = Path(f"{target}.{os.getpid()}")
    partial.write_text(content)
    partial.replace(target)
