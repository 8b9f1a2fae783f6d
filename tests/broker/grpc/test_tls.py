"""TLS on the gRPC endpoint (`tlsCertPath`, `tlsKeyPath`): with both set the port speaks TLS only.
A self-signed certificate for 127.0.0.1 is made with the `openssl` command; a gRPC client trusting
it, and the unmodified Python and Node 5.x clients with TLS on (their system roots extended with it:
GRPC_DEFAULT_SSL_ROOTS_FILE_PATH, NODE_EXTRA_CA_CERTS), send over it; a plaintext client cannot."""

from __future__ import annotations

import asyncio
import hashlib
import os
import platform
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from rocketlite.broker.config import BrokerConfig
from rocketlite.protocol.errors import ConfigError
from rocketlite.protocol.proto import available
from tests.support.aio import run
from tests.support.broker_harness import BrokerUnderTest, broker_under_test, stored_by_uniq_key
from tests.support.foreign_clients.grpc5 import DOORS, PYTHON5, door
from tests.support.foreign_clients.grpc5 import NODE5_MODULE as NODE5

if available() is not None and os.environ.get("CI") == "true":
    raise RuntimeError(f"CI=true needs the gRPC endpoint: {available()}")
pytestmark = [
    pytest.mark.skipif(available() is not None, reason=f"{available()}"),
    pytest.mark.skipif(
        shutil.which("openssl") is None, reason="the openssl command makes the test certificate"
    ),
]

if available() is None:
    import grpc

    from rocketlite.protocol.proto.v2 import definition_pb2 as pb
    from rocketlite.protocol.proto.v2 import service_pb2 as spb
    from rocketlite.protocol.proto.v2 import service_pb2_grpc

OK = 20000


def self_signed(directory: Path) -> tuple[Path, Path]:
    """A one-day certificate for 127.0.0.1 and localhost, and its key (PEM files)."""
    cert, key = directory / "rocketmq.crt", directory / "rocketmq.key"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert, key


def _port(broker: BrokerUnderTest) -> int:
    endpoint = broker.controller.parts.grpc if broker.controller.parts else None
    assert endpoint is not None and endpoint.port > 0
    return endpoint.port


def _send_request(topic: str) -> Any:
    body = b"over tls"
    return spb.SendMessageRequest(
        messages=[
            pb.Message(
                topic=pb.Resource(name=topic),
                system_properties=pb.SystemProperties(
                    message_id="01TLS",
                    body_digest=pb.Digest(type=pb.DigestType.MD5, checksum=hashlib.md5(body).hexdigest()),
                    message_type=pb.MessageType.NORMAL,
                ),
                body=body,
            )
        ]
    )


@pytest.mark.parametrize("impl", DOORS)
def test_tls_port_serves_a_client_that_trusts_the_certificate_and_refuses_plaintext(
    tmp_path: Path, impl: str
) -> None:
    cert, key = self_signed(tmp_path)

    async def scenario() -> None:
        async with broker_under_test(
            tmp_path / "store", tls_cert_path=str(cert), tls_key_path=str(key), **door(impl)
        ) as broker:
            target = f"127.0.0.1:{_port(broker)}"
            stubs: Any = service_pb2_grpc
            credentials = grpc.ssl_channel_credentials(root_certificates=cert.read_bytes())
            async with grpc.aio.secure_channel(target, credentials) as channel:
                sent = await stubs.MessagingServiceStub(channel).SendMessage(_send_request("TlsT"), timeout=5)
            assert sent.status.code == OK, sent
            assert "01TLS" in await stored_by_uniq_key(broker, "TlsT")
            async with grpc.aio.insecure_channel(target) as plain:
                with pytest.raises(grpc.aio.AioRpcError) as raised:
                    await stubs.MessagingServiceStub(plain).SendMessage(_send_request("TlsT"), timeout=5)
            assert raised.value.code() == grpc.StatusCode.UNAVAILABLE

    run(scenario())


def test_tls_keys_are_checked_at_startup(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="tlsCertPath and tlsKeyPath go together"):
        BrokerConfig(tls_cert_path="rocketmq.crt")
    not_pem = tmp_path / "not.pem"
    not_pem.write_text("hello")

    async def start(cert: str, key: str) -> None:
        async with broker_under_test(tmp_path / "store", tls_cert_path=cert, tls_key_path=key):
            pass

    with pytest.raises(ConfigError, match=r"tlsCertPath .*missing\.crt: cannot read"):
        run(start(str(tmp_path / "missing.crt"), str(not_pem)))
    with pytest.raises(ConfigError, match=r"tlsCertPath .*not\.pem: not a PEM certificate"):
        run(start(str(not_pem), str(not_pem)))


PY_PRODUCER = """
import sys
from rocketmq import ClientConfiguration, Credentials, Message, Producer

endpoint, topic = sys.argv[1:3]
config = ClientConfiguration(endpoint, Credentials(), request_timeout=3)
producer = Producer(config, (topic,), tls_enable=True)
producer.startup()
try:
    message = Message()
    message.topic = topic
    message.body = b"python over tls"
    print(producer.send(message).message_id, flush=True)
finally:
    producer.shutdown()
"""

NODE_PRODUCER = """
const [mod, endpoint, topic] = process.argv.slice(1);
const { Producer } = require(mod);
(async () => {
  const producer = new Producer({
    endpoints: endpoint, topics: [topic], requestTimeout: 3000, sslEnabled: true,
  });
  await producer.startup();
  const receipt = await producer.send({ topic, body: Buffer.from('node over tls') });
  console.log(receipt.messageId);
  await producer.shutdown();
})().catch((err) => { console.error(String(err)); process.exit(1); });
"""


def _require(why: str | None) -> None:
    if why is None:
        return
    if os.environ.get("CI", "").lower() == "true" and platform.machine() in ("x86_64", "AMD64"):
        pytest.fail(f"{why} (CI=true on x86_64: the 5.x client is required)")
    pytest.skip(why)


@pytest.mark.parametrize("impl", DOORS)
def test_official_clients_send_over_tls(tmp_path: Path, impl: str) -> None:
    why = None if PYTHON5.is_file() else f"{PYTHON5} is missing (run `make clients`)"
    if why is None and (shutil.which("node") is None or not (NODE5 / "package.json").is_file()):
        why = f"node or rocketmq-client-nodejs in {NODE5} is missing (run `make clients`)"
    _require(why)
    cert, key = self_signed(tmp_path)

    async def client(argv: list[str], home: Path) -> str:
        home.mkdir()
        env = {**os.environ, "HOME": str(home), "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH": str(cert),
               "NODE_EXTRA_CA_CERTS": str(cert)}  # fmt: skip
        proc = await asyncio.create_subprocess_exec(
            *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env
        )
        out, err = await asyncio.wait_for(proc.communicate(), 90)
        if proc.returncode != 0:
            logs = "\n".join(p.read_text(errors="replace")[-3000:] for p in home.rglob("*.log"))
            pytest.fail(f"{argv[0]} exited {proc.returncode}: {err.decode()[-3000:]}\n{logs}")
        return out.decode().split()[0]

    async def scenario() -> None:
        async with broker_under_test(
            tmp_path / "store", tls_cert_path=str(cert), tls_key_path=str(key), **door(impl)
        ) as broker:
            await broker.send("TlsT")  # the topic exists before the producers ask for its route
            endpoint = f"127.0.0.1:{_port(broker)}"
            python_id = await client([str(PYTHON5), "-c", PY_PRODUCER, endpoint, "TlsT"], tmp_path / "py")
            node_id = await client(
                ["timeout", "60", "node", "-e", NODE_PRODUCER, str(NODE5), endpoint, "TlsT"],
                tmp_path / "node",
            )
            stored = await stored_by_uniq_key(broker, "TlsT")
            assert stored[python_id][0] == b"python over tls"
            assert stored[node_id][0] == b"node over tls"

    run(scenario())
