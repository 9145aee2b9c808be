"""constraints.txt pins every Python package Switchboard installs (scripts/
lock.sh writes it; scripts/setup.sh and the image install under it): each
requirement of pyproject.toml is pinned there within its range, and this
environment holds exactly the pinned versions, so what CI tested is what a
fresh machine installs, whatever was released upstream since."""

from __future__ import annotations

import tomllib
from importlib import metadata
from pathlib import Path

from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]


def pins() -> dict[str, tuple[Version, Marker | None]]:
    """constraints.txt's lines ``name==version[ ; marker]``, by canonical name."""
    pinned: dict[str, tuple[Version, Marker | None]] = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        requirement = Requirement(line)
        (specifier,) = requirement.specifier
        assert specifier.operator == "==", line
        pinned[canonicalize_name(requirement.name)] = (Version(specifier.version), requirement.marker)
    return pinned


def test_every_requirement_of_pyproject_is_pinned_within_its_range() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    requirements = [*project["dependencies"], *project["optional-dependencies"]["dev"]]
    pinned = pins()
    for line in requirements:
        requirement = Requirement(line)
        name = canonicalize_name(requirement.name)
        assert name in pinned, f"{name} is not in constraints.txt: run scripts/lock.sh"
        version, _ = pinned[name]
        assert requirement.specifier.contains(version, prereleases=True), (
            f"constraints.txt pins {name} {version}, outside pyproject.toml's {requirement.specifier}: "
            "run scripts/lock.sh"
        )


def test_this_environment_holds_the_pinned_versions() -> None:
    installed: dict[str, Version] = {
        canonicalize_name(d.metadata["Name"]): Version(d.version) for d in metadata.distributions()
    }
    pinned = pins()
    here = [name for name, (_, marker) in pinned.items() if marker is None or marker.evaluate()]
    assert len(here) > 100
    wrong = {name: (str(installed.get(name)), str(pinned[name][0])) for name in here}
    wrong = {name: versions for name, versions in wrong.items() if versions[0] != versions[1]}
    assert not wrong, f"installed vs pinned: {wrong} (scripts/setup.sh installs the pins)"
