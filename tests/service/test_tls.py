"""TLS on a service's port (SWITCHBOARD_TLS_CERT_FILE / _KEY_FILE) and on
the calls to it (SWITCHBOARD_TLS_CA_FILE): a client holding the CA reaches
the service; a plaintext client or one trusting another CA does not."""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from grpc_health.v1 import health_pb2, health_pb2_grpc

from services.healthcheck import check
from services.router.server import build_server
from services.router.settings import RouterSettings
from services.shared.clients import open_channel
from services.shared.identity import user_metadata
from services.shared.settings import SecuritySettings
from switchboard.router.v1 import router_service_pb2 as pb
from switchboard.router.v1 import router_service_pb2_grpc
from tests.processes import free_port
from tests.service.harness import running


def self_signed(folder: Path, name: str) -> tuple[Path, Path]:
    """A self-signed certificate for localhost and 127.0.0.1 and its key (PEM files)."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = folder / f"{name}.crt", folder / f"{name}.key"
    cert_file.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return cert_file, key_file


@pytest.fixture
def certificate(tmp_path: Path) -> tuple[Path, Path]:
    return self_signed(tmp_path, "router")


@pytest.fixture
def health_port() -> int:
    return free_port()


@pytest.fixture
def router_options(certificate: tuple[Path, Path], health_port: int) -> dict[str, Any]:
    cert_file, key_file = certificate
    return {"tls_cert_file": cert_file, "tls_key_file": key_file, "health_port": health_port}


async def list_models(channel: grpc.aio.Channel) -> pb.ListModelsResponse:
    stub = router_service_pb2_grpc.RouterServiceStub(channel)
    return await stub.ListModels(pb.ListModelsRequest(), metadata=user_metadata("alice"), timeout=5)


@pytest.fixture
async def tls_port(router_settings: RouterSettings) -> AsyncIterator[int]:
    async with running(build_server, router_settings) as (service, _):
        yield service.port


@pytest.mark.parametrize("host", ["localhost", "127.0.0.1"])
async def test_a_client_trusting_the_services_certificate_calls_it_over_tls(
    tls_port: int, certificate: tuple[Path, Path], host: str
) -> None:
    credentials = SecuritySettings(tls_ca_file=certificate[0]).channel_credentials()
    assert credentials is not None
    async with open_channel(f"{host}:{tls_port}", credentials) as channel:
        listed = await list_models(channel)
    assert listed.models, "the router lists its configured models"
    # The health-check command speaks TLS with the same CA.
    assert await asyncio.to_thread(check, f"{host}:{tls_port}", "", 5.0, credentials) == "SERVING"


async def test_a_plaintext_client_or_one_trusting_another_ca_is_refused(
    tls_port: int, tmp_path: Path
) -> None:
    async with open_channel(f"127.0.0.1:{tls_port}") as plain:
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await list_models(plain)
    assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
    other_ca, _ = self_signed(tmp_path, "impostor")
    credentials = SecuritySettings(tls_ca_file=other_ca).channel_credentials()
    async with open_channel(f"localhost:{tls_port}", credentials) as untrusting:
        with pytest.raises(grpc.aio.AioRpcError) as untrusted:
            await list_models(untrusting)
    assert untrusted.value.code() == grpc.StatusCode.UNAVAILABLE


async def test_probes_that_cannot_speak_tls_get_health_alone_on_the_plaintext_health_port(
    tls_port: int, health_port: int
) -> None:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{health_port}") as probe:
        reply = await health_pb2_grpc.HealthStub(probe).Check(health_pb2.HealthCheckRequest(), timeout=5)
        assert reply.status == health_pb2.HealthCheckResponse.SERVING
        with pytest.raises(grpc.aio.AioRpcError) as absent:
            await list_models(probe)
    assert absent.value.code() == grpc.StatusCode.UNIMPLEMENTED


def test_a_certificate_without_its_key_stops_the_service(certificate: tuple[Path, Path]) -> None:
    with pytest.raises(ValueError, match="both SWITCHBOARD_TLS_CERT_FILE and SWITCHBOARD_TLS_KEY_FILE"):
        RouterSettings(port=0, tls_cert_file=certificate[0]).server_credentials()


def test_without_tls_settings_the_port_and_calls_are_plaintext() -> None:
    assert RouterSettings(port=0).server_credentials() is None
    assert SecuritySettings().channel_credentials() is None
