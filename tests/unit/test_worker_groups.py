"""The suite's split over pytest-xdist workers (tests/worker_groups.py): the
e2e modules with the same launch settings run on one worker, one after the
other, and every other module stays whole on one worker."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

from tests.worker_groups import HeaviestFirst, group_weight, load_durations, record_durations

ROOT = Path(__file__).resolve().parents[2]

CONFTEST = """
import pytest
from tests.worker_groups import WorkerGroups, write_groups

def pytest_configure(config):
    config.pluginmanager.register(WorkerGroups(), "switchboard-worker-groups")

def pytest_collection_modifyitems(config, items):
    write_groups(config, items)

@pytest.fixture
def launched():
    return None
"""

SHARED = 'LAUNCH_ENV = {"SETTING": "one"}\n'
OTHER = 'LAUNCH_ENV = {"SETTING": "two"}\n'


def module(settings: str, launched: bool) -> str:
    argument = "launched" if launched else ""
    tests = "".join(f"def test_{i}({argument}):\n    pass\n\n" for i in range(4))
    return settings + "\n" + tests


def test_modules_with_the_same_launch_settings_run_on_one_worker(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text(CONFTEST)
    files = {
        "test_a_shared.py": module(SHARED, True),
        "test_b_plain.py": module("", False),
        "test_c_other.py": module(OTHER, True),
        "test_d_plain.py": module("", False),
        "test_e_shared.py": module(SHARED, True),
        "test_f_default.py": module("", True),
        "test_g_default.py": module("", True),
    }
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "2", "--dist", "loadgroup", "-v"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    workers: dict[str, set[str]] = defaultdict(set)
    for worker, name in re.findall(r"\[(gw\d)\].* PASSED (test_\w+)\.py", result.stdout):
        workers[name].add(worker)
    assert set(workers) == {name.removesuffix(".py") for name in files}, result.stdout
    assert all(len(seen) == 1 for seen in workers.values()), workers
    assert workers["test_a_shared"] == workers["test_e_shared"], workers
    assert workers["test_f_default"] == workers["test_g_default"], workers
    # Both workers took work: the groups were split, not all sent to one.
    assert {worker for seen in workers.values() for worker in seen} == {"gw0", "gw1"}, workers


def test_the_heaviest_group_left_is_handed_out_first() -> None:
    durations = {"tests/e2e/test_long.py": 90.0, "tests/unit/test_quick.py": 1.0}
    queue = HeaviestFirst(lambda tests: group_weight(tests, durations))
    queue["tests/unit/test_quick.py"] = {f"tests/unit/test_quick.py::test_{i}": False for i in range(50)}
    # Not in the durations: half a second per test.
    queue["tests/service/test_new.py"] = {f"tests/service/test_new.py::test_{i}": False for i in range(30)}
    queue["launch-abc"] = {"tests/e2e/test_long.py::test_a": False, "tests/e2e/test_long.py::test_b": False}
    order = [queue.popitem(last=False)[0] for _ in range(3)]
    assert order == ["launch-abc", "tests/service/test_new.py", "tests/unit/test_quick.py"]
    assert not queue


def test_durations_are_recorded_per_module_from_a_junit_report(tmp_path: Path) -> None:
    report = tmp_path / "junit.xml"
    report.write_text(
        '<testsuites><testsuite name="pytest">'
        '<testcase classname="tests.unit.test_worker_groups" name="a" time="1.25"/>'
        '<testcase classname="tests.unit.test_worker_groups" name="b" time="0.5"/>'
        '<testcase classname="tests.e2e.test_fuzz" name="c" time="3"/>'
        '<testcase classname="tests.unit.test_nothing_here" name="d" time="9"/>'
        "</testsuite></testsuites>"
    )
    target = tmp_path / "durations.json"
    recorded = record_durations(report, target)
    assert recorded == {"tests/e2e/test_fuzz.py": 3.0, "tests/unit/test_worker_groups.py": 1.8}
    assert load_durations(target) == recorded
    assert load_durations(tmp_path / "missing.json") == {}
