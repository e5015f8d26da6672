"""Ray addresses for the ES route's workers: what answers is checked before Ray waits on it."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator

import gymnasium as gym
import pytest
from sb3_contrib import RecurrentPPO

from paperports.integrations.sb3 import (
    ObservationalDropoutPolicy,
    ObservationalDropoutWrapper,
    train_with_es,
)
from paperports.integrations.sb3.workers import RayEvaluator, check_ray_address

ray = pytest.importorskip("ray")


def make_env() -> ObservationalDropoutWrapper:
    return ObservationalDropoutWrapper(gym.make("paperports/CartPoleSwingUpHarder-v0"), 0.1)


def _serve(reply: Callable[[socket.socket], None]) -> Iterator[str]:
    """A local TCP server answering each connection with ``reply``; yields its address."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    stop = threading.Event()

    def loop() -> None:
        while not stop.is_set():
            try:
                connection, _ = server.accept()
            except TimeoutError:
                continue
            with connection:
                reply(connection)

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    yield f"127.0.0.1:{server.getsockname()[1]}"
    stop.set()
    thread.join()
    server.close()


def _http1(connection: socket.socket) -> None:  # a web server, a dashboard's port say
    connection.recv(1024)
    connection.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")


def _hang_up(connection: socket.socket) -> None:
    pass  # accepts, then closes without a word


@pytest.fixture(params=[_http1, _hang_up], ids=["http1", "hang-up"])
def not_ray(request: pytest.FixtureRequest) -> Iterator[str]:
    yield from _serve(request.param)


def test_an_address_where_something_else_answers_is_refused_before_ray_starts(
    not_ray: str,
) -> None:
    """Ray itself retries such an address for minutes; the check names it at once, with
    the local default, and nothing is started."""
    assert not ray.is_initialized()
    policy = RecurrentPPO(
        ObservationalDropoutPolicy, make_env(), seed=0, policy_kwargs={"net_arch": [4]}
    ).policy
    began = time.perf_counter()
    with pytest.raises(ValueError, match="no Ray cluster answers") as refused:
        train_with_es(policy, make_env, 1, population=4, episodes=1, workers=2, ray_address=not_ray)
    assert time.perf_counter() - began < 10.0  # the check's own timeouts, not Ray's retries
    message = str(refused.value)
    assert repr(not_ray) in message and "ray_address=None starts a local Ray" in message
    assert not ray.is_initialized()
    with pytest.raises(ValueError, match="no Ray cluster answers"):
        check_ray_address(f"ray://{not_ray}", "RayEvaluator")


def test_with_tls_only_the_connection_is_checked(
    not_ray: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ray's TLS endpoints expect a TLS handshake, not HTTP/2's preface: with
    ``RAY_USE_TLS`` set, an address that answers passes to Ray, one that does not is still
    refused."""
    monkeypatch.setenv("RAY_USE_TLS", "1")
    assert check_ray_address(not_ray, "RayEvaluator") == not_ray
    with pytest.raises(ValueError, match=r"127\.0\.0\.1:9"):
        check_ray_address("127.0.0.1:9", "RayEvaluator")


def test_a_running_ray_is_recognised_by_its_address() -> None:
    """The address of a running Ray's GCS passes the check (it is a gRPC server)."""
    assert not ray.is_initialized()
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        address = ray.get_runtime_context().gcs_address
        assert check_ray_address(address, "RayEvaluator") == address
    finally:
        ray.shutdown()


def test_auto_where_no_ray_runs_names_the_local_default() -> None:
    """``"auto"`` finds no cluster on this machine: refused with the local default named,
    not Ray's bare ``ConnectionError``."""
    assert not ray.is_initialized()
    try:
        running = ray._private.utils.read_ray_address()
    except Exception:
        running = None
    if running:
        pytest.skip(f"a Ray cluster runs on this machine ({running}); 'auto' would join it")
    policy = RecurrentPPO(ObservationalDropoutPolicy, make_env(), seed=0).policy
    with pytest.raises(ValueError, match="ray_address=None starts a local Ray") as refused:
        RayEvaluator(policy, make_env, 2, "auto")
    assert "'auto'" in str(refused.value)
    assert not ray.is_initialized()
