"""python -m services.launcher: starts the whole system on one machine — the
four services and the gateway, each its own OS process — waits until each is
healthy, prints where to open it, prefixes every log line with its process,
and stops everything on Ctrl-C (SIGTERM to each, then SIGKILL after a grace).

A process that dies is restarted after a backoff while the others keep
running (services.launcher_restarts); one that keeps dying stops the system
with a message naming it and a non-zero exit."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import secrets
import signal
import socket
import sys
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import httpx
from grpc_health.v1 import health_pb2, health_pb2_grpc

from gateway.settings import LAUNCH_ID_HEADER
from gateway.tokens import create_token, hash_token, read_records
from services.launcher_restarts import CrashHistory, RestartPolicy
from services.shared import exit_codes, timer
from switchboard.engine.v1 import engine_service_pb2
from switchboard.memory.v1 import memory_service_pb2
from switchboard.router.v1 import router_service_pb2
from switchboard.threads.v1 import threads_service_pb2

COLORS = {"threads": 36, "memory": 35, "router": 33, "engine": 32, "gateway": 34}
# "a2a": the gateway's second port, A2A's gRPC binding (gateway/a2a/).
DEFAULT_PORTS = {
    "engine": 50051,
    "router": 50052,
    "threads": 50053,
    "memory": 50054,
    "gateway": 8080,
    "a2a": 50055,
}
# The processes, in DEFAULT_PORTS' order; the other names are ports of one of them.
PROCESSES = ("engine", "router", "threads", "memory", "gateway")
STARTUP_TIMEOUT = 60.0
# With --ephemeral-ports, start-ups tried when a picked port was taken meanwhile.
EPHEMERAL_ATTEMPTS = 3
# The gRPC service whose health says a child is up: another process answering
# on the child's port (another service, a peer's server) is not the child.
HEALTH_SERVICES = {
    "engine": engine_service_pb2.DESCRIPTOR.services_by_name["EngineService"].full_name,
    "router": router_service_pb2.DESCRIPTOR.services_by_name["RouterService"].full_name,
    "threads": threads_service_pb2.DESCRIPTOR.services_by_name["ThreadsService"].full_name,
    "memory": memory_service_pb2.DESCRIPTOR.services_by_name["MemoryService"].full_name,
}


@dataclass
class Child:
    name: str
    module: str
    port: int
    env: dict[str, str]
    metrics_port: int = 0  # its Prometheus port, when the launcher picked one
    other_ports: list[int] = field(default_factory=list)  # the gateway's A2A gRPC port
    process: asyncio.subprocess.Process | None = None
    pumps: list[asyncio.Task[None]] = field(default_factory=list)


def free_ports(count: int) -> list[int]:
    """``count`` distinct ports free now. Every socket stays bound until all
    are picked: one bound and closed at a time, the kernel may hand the same
    port out twice (two services then fight over it)."""
    with contextlib.ExitStack() as held:
        sockets = [held.enter_context(socket.socket()) for _ in range(count)]
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [int(sock.getsockname()[1]) for sock in sockets]


def port_in_use(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def plan(
    ports: dict[str, int],
    data_dir: Path,
    extra_env: dict[str, str],
    metrics_ports: dict[str, int] | None = None,
) -> list[Child]:
    """The processes and their environment; addresses point at each other.
    ``metrics_ports``: a Prometheus port for each gRPC service (the gateway
    serves /metrics on its own port)."""
    addr = {name: f"127.0.0.1:{port}" for name, port in ports.items()}
    base = {**os.environ, "SWITCHBOARD_DATA_DIR": str(data_dir), "PYTHONUNBUFFERED": "1", **extra_env}
    children = [
        Child(
            name,
            f"services.{name}",
            ports[name],
            {**base, f"SWITCHBOARD_{name.upper()}_PORT": str(ports[name])},
        )
        for name in ("threads", "memory", "router")
    ]
    # Threads asks memory for the handoff summary of each rotated segment,
    # and who is a member of an agent's project (ProjectsService).
    children[0].env["SWITCHBOARD_THREADS_MEMORY_ADDRESS"] = addr["memory"]
    children.append(
        Child(
            "engine",
            "services.engine",
            ports["engine"],
            {
                **base,
                "SWITCHBOARD_ENGINE_PORT": str(ports["engine"]),
                "SWITCHBOARD_ENGINE_THREADS_ADDRESS": addr["threads"],
                "SWITCHBOARD_ENGINE_MEMORY_ADDRESS": addr["memory"],
                "SWITCHBOARD_ENGINE_ROUTER_ADDRESS": addr["router"],
            },
        )
    )
    children.append(
        Child(
            "gateway",
            "gateway",
            ports["gateway"],
            {
                **base,
                "SWITCHBOARD_GATEWAY_PORT": str(ports["gateway"]),
                # /healthz echoes it: another program answering on the port is not our gateway.
                "SWITCHBOARD_GATEWAY_LAUNCH_ID": secrets.token_hex(8),
                "SWITCHBOARD_GATEWAY_ENGINE_ADDRESS": addr["engine"],
                "SWITCHBOARD_GATEWAY_THREADS_ADDRESS": addr["threads"],
                "SWITCHBOARD_GATEWAY_MEMORY_ADDRESS": addr["memory"],
                "SWITCHBOARD_GATEWAY_ROUTER_ADDRESS": addr["router"],
                "SWITCHBOARD_GATEWAY_A2A_GRPC_PORT": str(ports["a2a"]),
            },
            other_ports=[ports["a2a"]],
        )
    )
    for child in children:
        if metrics_ports and child.name in metrics_ports:
            child.metrics_port = metrics_ports[child.name]
            child.env[f"SWITCHBOARD_{child.name.upper()}_METRICS_PORT"] = str(child.metrics_port)
    return children


async def pump(name: str, stream: asyncio.StreamReader, color: bool) -> None:
    """Copies a child's output to ours, line by line, for as long as it
    lives: a child whose output nobody reads blocks on its next write."""
    prefix = f"\x1b[{COLORS[name]}m{name:>7}\x1b[0m | " if color else f"{name:>7} | "
    while True:
        try:
            line = await stream.readline()
        except ValueError:  # longer than the stream's buffer: the reader dropped it
            line = b"[a line longer than 64 KiB, left out]\n"
        if not line:
            return
        sys.stdout.write(prefix + line.decode(errors="replace"))
        sys.stdout.flush()


async def start(child: Child, color: bool) -> None:
    child.process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        child.module,
        env=child.env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        start_new_session=True,  # Ctrl-C reaches the launcher only; it stops children in order
    )
    assert child.process.stdout is not None
    child.pumps.append(asyncio.create_task(pump(child.name, child.process.stdout, color)))


class StartFailed(RuntimeError):
    """``child`` exited or never turned healthy during start-up."""

    def __init__(self, child: Child, message: str) -> None:
        super().__init__(message)
        self.child = child

    @property
    def port_taken(self) -> str | None:
        """Which port of the child's another process took between the
        launcher picking it and the child binding it ("port 8123", or "port"
        when the child said so but it is free again), None when the child
        failed otherwise. A service says so by its exit status; the gateway
        (uvicorn exits 1) only by the port still answering."""
        process, child = self.child.process, self.child
        if process is None or process.returncode is None:
            return None
        ports = [child.port, *child.other_ports] + ([child.metrics_port] if child.metrics_port else [])
        answering = next((port for port in ports if port_in_use(port)), None)
        if answering is not None:
            return f"port {answering}"
        return "port" if process.returncode == exit_codes.CANNOT_LISTEN else None


async def wait_healthy(child: Child) -> None:
    """gRPC health SERVING for the service's own name; for the gateway,
    /healthz 200 with the launch id it was started with. Another program on
    the child's port (a peer's server) is never taken for the child."""
    if child.name != "gateway":

        async def serving() -> bool:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{child.port}") as channel:
                reply = await health_pb2_grpc.HealthStub(channel).Check(
                    health_pb2.HealthCheckRequest(service=HEALTH_SERVICES[child.name]), timeout=1
                )
            return bool(reply.status == health_pb2.HealthCheckResponse.SERVING)

        await _poll(child, serving)
        return
    # One HTTP client for the whole wait: a client per poll built a TLS
    # context each time, which was most of the launcher's start-up CPU.
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{child.port}", timeout=1) as http:

        async def answers() -> bool:
            response = await http.get("/healthz")
            ours = child.env.get("SWITCHBOARD_GATEWAY_LAUNCH_ID", "")
            return response.status_code == 200 and response.headers.get(LAUNCH_ID_HEADER, "") == ours

        await _poll(child, answers)


async def _poll(child: Child, healthy: Callable[[], Awaitable[bool]]) -> None:
    """``healthy()`` every 0.1 s until it is true; StartFailed when the child
    exits first or the start-up timeout passes."""
    deadline = time.monotonic() + STARTUP_TIMEOUT
    while time.monotonic() < deadline:
        assert child.process is not None
        if child.process.returncode is not None:
            raise StartFailed(
                child, f"{child.name} exited with code {child.process.returncode} during start-up"
            )
        try:
            if await healthy():
                return
        except (grpc.aio.AioRpcError, httpx.HTTPError):
            pass
        await asyncio.sleep(0.1)
    raise StartFailed(child, f"{child.name} was not healthy after {STARTUP_TIMEOUT:.0f}s")


async def stop_all(children: list[Child], grace: float = 15.0) -> None:
    """SIGTERM in reverse start order (gateway first), SIGKILL after ``grace``."""
    for child in reversed(children):
        if child.process is not None and child.process.returncode is None:
            child.process.send_signal(signal.SIGTERM)
            try:
                async with asyncio.timeout(grace):
                    await child.process.wait()
            except TimeoutError:
                child.process.kill()
                await child.process.wait()
    for child in children:
        for task in child.pumps:
            await task


def identity_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The services trust only identity tokens signed with the key they
    share: the one the environment sets, else a new one per start, known to
    the five processes alone (docs/security.md)."""
    if environ.get("SWITCHBOARD_IDENTITY_KEY") or environ.get("SWITCHBOARD_IDENTITY_KEY_FILE"):
        return {}
    return {"SWITCHBOARD_IDENTITY_KEY": secrets.token_urlsafe(32)}


def dev_token(data_dir: Path, tokens_file: Path, user: str) -> str:
    """The development token of ``user``: the one kept in the data dir while
    the tokens file still holds its hash, else a new one with the admin role
    (only its hash goes to the tokens file; the token itself stays in
    ``dev-token``, mode 0600)."""
    kept = data_dir / "dev-token"
    if kept.exists():
        token = kept.read_text().strip()
        if any(r.sha256 == hash_token(token) for r in read_records(tokens_file)):
            return token
    # An admin: the one person on the laptop manages its skill catalog and agents.
    _, token = create_token(tokens_file, user, "local launcher development token", role="admin")
    data_dir.mkdir(parents=True, exist_ok=True)
    kept.write_text(token + "\n")
    kept.chmod(0o600)
    return token


async def start_all(children: list[Child], color: bool) -> None:
    """Starts the processes in dependency order, each group once the one
    before is healthy; StartFailed names the first that is not."""
    # Threads, memory and router have no dependencies: start them together.
    for group in (children[:3], children[3:4], children[4:]):
        for child in group:
            await start(child, color)
        await asyncio.gather(*(wait_healthy(child) for child in group))


async def run(args: argparse.Namespace) -> int:
    names = list(DEFAULT_PORTS)
    if not args.ephemeral_ports:
        ports = {name: DEFAULT_PORTS[name] + args.port_offset for name in names}
        busy = [f"{name} ({port})" for name, port in ports.items() if port_in_use(port)]
        if busy:
            print(
                f"Ports already in use: {', '.join(busy)}. Is Switchboard already running? "
                "Use --port-offset N or --ephemeral-ports.",
                file=sys.stderr,
            )
            return 2
    extra_env = identity_env(os.environ)
    if args.offline_token_delay:
        extra_env["SWITCHBOARD_ENGINE_OFFLINE_TOKEN_DELAY"] = str(args.offline_token_delay)
    token = ""
    if not args.no_auth:
        # Token auth, as deployed: a development token for the dev user,
        # besides any tokens the environment configures.
        tokens_file = Path(
            os.environ.get("SWITCHBOARD_GATEWAY_TOKENS_FILE")
            or args.data_dir.resolve() / "gateway-tokens.json"
        )
        user = os.environ.get("SWITCHBOARD_GATEWAY_DEV_USER") or "local"
        token = dev_token(args.data_dir.resolve(), tokens_file, user)
        extra_env["SWITCHBOARD_GATEWAY_TOKENS_FILE"] = str(tokens_file)
    color = sys.stdout.isatty()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    metrics_ports: dict[str, int] = {}
    for attempt in range(1, EPHEMERAL_ATTEMPTS + 1):
        if args.ephemeral_ports:
            # Metrics too, on ports of their own, reported in the ready file.
            metered = [name for name in PROCESSES if name != "gateway"]
            picked = iter(free_ports(len(names) + len(metered)))
            ports = {name: next(picked) for name in names}
            metrics_ports = {name: next(picked) for name in metered}
        children = plan(ports, args.data_dir.resolve(), extra_env, metrics_ports)
        try:
            await start_all(children, color)
        except StartFailed as error:
            await stop_all(children)
            # A free port is only free until someone binds it: another
            # program on the machine may take it before the child does.
            taken = error.port_taken
            if args.ephemeral_ports and taken and attempt < EPHEMERAL_ATTEMPTS:
                note(f"{error.child.name}'s {taken} was taken meanwhile; starting on other ports")
                continue
            print(f"Switchboard failed to start: {error}", file=sys.stderr)
            return 1
        break
    url = f"http://127.0.0.1:{ports['gateway']}"
    external = [
        name
        for name in ("threads", "memory", "router", "engine")
        if os.environ.get(f"SWITCHBOARD_{name.upper()}_DATABASE_URL")
    ]
    data = f"SQLite files in {args.data_dir.resolve()}"
    if external:
        data += f" (except {', '.join(external)}: SWITCHBOARD_<SERVICE>_DATABASE_URL)"
    page = f"{url}/?token={token}" if token else f"{url}/"
    auth = f"Authorization: Bearer {token}" if token else "none (--no-auth)"
    print(
        f"\nSwitchboard is up.\n  Web page:  {page}\n  HTTP API:  {url}/api/agent  (OpenAPI: {url}/docs)\n"
        f"  A2A:       {url}/a2a/agents/<agent id>  (JSON-RPC; agents: {url}/a2a/agents)"
        f"  gRPC :{ports['a2a']}\n"
        f"  Auth:      {auth}\n"
        f"  gRPC:      engine :{ports['engine']}  router :{ports['router']}  threads :{ports['threads']}"
        f"  memory :{ports['memory']}\n  Data:      {data}\nPress Ctrl-C to stop.\n",
        flush=True,
    )
    if args.ready_file:
        ready = {"url": url, "ports": ports, "metrics_ports": metrics_ports, "dev_token": token}
        args.ready_file.write_text(json.dumps(ready))
    policy = RestartPolicy(args.max_crashes, args.crash_window, args.restart_backoff)
    failed: list[str] = []
    watchers = [asyncio.create_task(watch(child, color, policy, stop, failed)) for child in children]
    await stop.wait()
    for watcher in watchers:
        watcher.cancel()
    await asyncio.gather(*watchers, return_exceptions=True)
    print("Stopping Switchboard…", flush=True)
    await stop_all(children)
    return 1 if failed else 0


def note(message: str) -> None:
    sys.stdout.write(f"{'launcher':>7} | {message}\n")
    sys.stdout.flush()


async def watch(
    child: Child, color: bool, policy: RestartPolicy, stop: asyncio.Event, failed: list[str]
) -> None:
    """Restarts ``child`` each time it dies, until the launcher stops (this
    task is then cancelled) or it dies too often: then its name goes to
    ``failed`` and ``stop`` is set."""
    history = CrashHistory(policy)
    while True:
        assert child.process is not None
        code = await child.process.wait()
        died = timer.monotonic()
        delay = history.crashed()
        if delay is None:
            message = (
                f"{child.name} crashed {policy.max_crashes} times within {policy.window:g}s "
                f"(last exit code {code}); stopping Switchboard."
            )
            note(message)
            print(f"Switchboard stopped: {message}", file=sys.stderr, flush=True)
            failed.append(child.name)
            stop.set()
            return
        note(f"{child.name} exited with code {code}; restarting it in {delay:g}s")
        await timer.sleep(delay)
        await start(child, color)
        try:
            await wait_healthy(child)
        except RuntimeError as error:
            note(f"{child.name} did not come back: {error}")
            if child.process is not None and child.process.returncode is None:
                child.process.kill()
            continue
        note(f"{child.name} restarted: healthy {timer.monotonic() - died:.2f}s after it exited")


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m services.launcher", description=__doc__)
    parser.add_argument("--data-dir", type=Path, default=Path(".data"), help="folder of the SQLite files")
    parser.add_argument("--port-offset", type=int, default=0, help="add N to every default port")
    parser.add_argument("--ephemeral-ports", action="store_true", help="pick free ports (tests)")
    parser.add_argument("--ready-file", type=Path, help="write the URL and ports here as JSON once healthy")
    parser.add_argument(
        "--no-auth",
        action="store_true",
        help="no development token: without SWITCHBOARD_GATEWAY_TOKENS every request is the dev user",
    )
    parser.add_argument(
        "--offline-token-delay", type=float, default=0.0, help="seconds between offline tokens (demo)"
    )
    parser.add_argument(
        "--max-crashes",
        type=int,
        default=RestartPolicy.max_crashes,
        help="stop everything when one process crashes this many times within --crash-window",
    )
    parser.add_argument(
        "--crash-window", type=float, default=RestartPolicy.window, help="seconds (see --max-crashes)"
    )
    parser.add_argument(
        "--restart-backoff",
        type=float,
        default=RestartPolicy.base,
        help="seconds before restarting a crashed process, doubled for each recent crash",
    )
    return parser.parse_args(argv)


def main() -> None:
    sys.exit(asyncio.run(run(parse())))


if __name__ == "__main__":
    main()
