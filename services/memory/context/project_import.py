"""``python -m services.memory import-project FOLDER --project ID --user USER
[--address HOST:PORT]``: imports a project folder's ``.ideai/CONTEXT.md``
and ``.ideai/memory/*.md`` into a running memory service, as that user.

The files are read here, on the client, and sent with ImportProjectFiles:
the service never reads a path on its own disk, so a folder on a laptop can
be imported into a memory service running anywhere. Re-running it is safe:
unchanged files are reported unchanged and nothing is written. A project
that does not exist yet is created, owned by the user."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence
from pathlib import Path

import grpc

from services.memory.settings import MemorySettings
from services.shared.clients import open_channel
from services.shared.identity import user_metadata
from services.shared.identity_tokens import configure
from services.shared.projects import is_personal_name
from switchboard.memory.v1 import (
    memory_pb2,
    memory_service_pb2,
    memory_service_pb2_grpc,
    projects_pb2,
    projects_service_pb2,
    projects_service_pb2_grpc,
)

MAX_FILES = 500


def project_files(folder: Path) -> list[memory_pb2.ProjectFile]:
    """The folder's context file and memory notes, with paths relative to it."""
    ideai = folder / ".ideai"
    if not ideai.is_dir():
        raise FileNotFoundError(f"{folder} has no .ideai folder")
    paths = [ideai / "CONTEXT.md"] if (ideai / "CONTEXT.md").is_file() else []
    paths += sorted((ideai / "memory").glob("*.md")) if (ideai / "memory").is_dir() else []
    if len(paths) > MAX_FILES:
        raise ValueError(f"{len(paths)} files; at most {MAX_FILES} per import")
    return [
        memory_pb2.ProjectFile(
            path=path.relative_to(folder).as_posix(), content=path.read_text(encoding="utf-8")
        )
        for path in paths
    ]


async def import_folder(
    address: str,
    project: str,
    user: str,
    folder: Path,
    credentials: grpc.ChannelCredentials | None = None,
) -> list[memory_pb2.ImportItem]:
    request = memory_service_pb2.ImportProjectFilesRequest(project_id=project, files=project_files(folder))
    async with open_channel(address, credentials) as channel:
        if not is_personal_name(project):
            await ensure_project(projects_service_pb2_grpc.ProjectsServiceStub(channel), project, user)
        stub = memory_service_pb2_grpc.MemoryServiceStub(channel)
        response = await stub.ImportProjectFiles(request, metadata=user_metadata(user), timeout=60)
    return list(response.items)


async def ensure_project(
    stub: projects_service_pb2_grpc.ProjectsServiceStub, project: str, user: str
) -> None:
    """Creates the project for ``user`` unless it exists (theirs or not: the
    import then says NOT_FOUND for a project they are not a member of)."""
    request = projects_service_pb2.CreateProjectRequest(
        project=projects_pb2.Project(id=project, display_name=project)
    )
    try:
        await stub.CreateProject(request, metadata=user_metadata(user), timeout=60)
    except grpc.aio.AioRpcError as error:
        if error.code() != grpc.StatusCode.ALREADY_EXISTS:
            raise


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m services.memory import-project", description=__doc__)
    parser.add_argument("folder", type=Path, help="the project folder (the one holding .ideai/)")
    parser.add_argument(
        "--project", required=True, help="project id in memory (created for the user when missing)"
    )
    parser.add_argument("--user", required=True, help="the user the notes belong to")
    parser.add_argument("--address", default="127.0.0.1:50054", help="the memory service")
    args = parser.parse_args(argv)
    # Acting as the user takes the system's identity key, as every service call does.
    settings = MemorySettings()
    try:
        configure(settings.identity_tokens())
        credentials = settings.channel_credentials()
        items = asyncio.run(import_folder(args.address, args.project, args.user, args.folder, credentials))
    except (OSError, ValueError) as error:
        print(f"import-project: {error}", file=sys.stderr)
        return 2
    except grpc.aio.AioRpcError as error:
        print(f"import-project: {error.code().name}: {error.details()}", file=sys.stderr)
        return 1
    for item in items:
        outcome = memory_pb2.ImportOutcome.Name(item.outcome).removeprefix("IMPORT_OUTCOME_").lower()
        print(f"{outcome:9} {item.path}" + (f"  ({item.reason})" if item.reason else ""))
    return 0
