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
``--dist loadgroup``.

Groups are handed out heaviest first, by the seconds their modules took in a
recorded run (tests/durations.json; a module missing from it counts half a
second per test): a worker that takes a long group last would end the run
alone. ``python -m tests.worker_groups JUNIT.xml`` records the file again
from a run's JUnit report (``scripts/test.sh --junitxml=JUNIT.xml``)."""

from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile
import xml.etree.ElementTree as ET
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from xdist.scheduler import LoadScopeScheduling

GROUPS_FILE = "switchboard_groups_file"
DURATIONS = Path(__file__).with_name("durations.json")
# What a module missing from DURATIONS weighs, per test (seconds).
UNKNOWN_TEST_SECONDS = 0.5


def load_durations(path: Path = DURATIONS) -> dict[str, float]:
    try:
        return {str(k): float(v) for k, v in json.loads(path.read_text()).items()}
    except (OSError, ValueError, AttributeError):
        return {}


def group_weight(tests: list[str], durations: dict[str, float]) -> float:
    """The recorded seconds of the modules of ``tests`` (node ids)."""
    counts: dict[str, int] = {}
    for nodeid in tests:
        module = nodeid.split("::", 1)[0]
        counts[module] = counts.get(module, 0) + 1
    return sum(durations.get(module, UNKNOWN_TEST_SECONDS * n) for module, n in counts.items())


class HeaviestFirst(OrderedDict[str, dict[str, bool]]):
    """xdist's queue of work units (a group -> its tests): the scheduler
    takes the next one with ``popitem(last=False)``, which here is the
    heaviest left (the first of equals)."""

    def __init__(self, weight: Callable[[list[str]], float]) -> None:
        super().__init__()
        self._weight = weight

    def popitem(self, last: bool = True) -> tuple[str, dict[str, bool]]:
        group = max(self, key=lambda g: self._weight(list(self[g])))
        return group, self.pop(group)


def worker_group(item: pytest.Item) -> str:
    module = getattr(item, "module", None)
    if "launched" in getattr(item, "fixturenames", ()):
        settings = json.dumps(sorted(getattr(module, "LAUNCH_ENV", {}).items()))
        return "launch-" + hashlib.sha256(settings.encode()).hexdigest()[:12]
    return item.nodeid.split("::", 1)[0]


class GroupScheduling(LoadScopeScheduling):
    """Whole groups per worker, heaviest first."""

    def __init__(self, config: pytest.Config, log: Any, groups_file: Path) -> None:
        super().__init__(config, log)
        self._groups_file = groups_file
        self._groups: dict[str, str] | None = None
        durations = load_durations()
        self.workqueue = HeaviestFirst(lambda tests: group_weight(tests, durations))

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


def record_durations(junit: Path, target: Path = DURATIONS) -> dict[str, float]:
    """Each module's seconds in a JUnit report (its tests' times summed),
    written to ``target``."""
    root = Path(__file__).resolve().parents[1]
    seconds: dict[str, float] = {}
    for case in ET.parse(junit).iter("testcase"):
        parts = (case.get("classname") or "").split(".")
        # The module is the longest prefix that is a file (a class may follow).
        module = next(
            (m for n in range(len(parts), 0, -1) if (root / (m := "/".join(parts[:n]) + ".py")).is_file()),
            None,
        )
        if module is not None:
            seconds[module] = seconds.get(module, 0.0) + float(case.get("time") or 0.0)
    durations = {module: round(value, 1) for module, value in sorted(seconds.items())}
    target.write_text(json.dumps(durations, indent=1) + "\n")
    return durations


if __name__ == "__main__":
    record_durations(Path(sys.argv[1]))
