r"""Population evaluation on several workers, through Ray.

An evolution strategy's generation is embarrassingly parallel: each candidate's return
depends on its parameters and the generation's episode seeds alone. :class:`RayEvaluator`
splits the candidates into one contiguous block per worker, has each worker run
:func:`~paperports.integrations.sb3.evolution.population_returns` on its block (the policy
and ``make_env`` are shipped to the workers once), and joins the returns in order, so a
generation scores as it does on one worker (the same episodes, actions and returns, up to
floating-point rounding of the batched products).

``address=None`` starts a local Ray with ``workers`` CPUs (no cluster needed); the address
of a running cluster (``"auto"`` on one of its machines, ``"host:port"`` or
``"ray://host:port"``) points the same code at it. ``make_env`` must be importable by the
workers (a module-level function, or one that Ray's ``runtime_env`` ships).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np

from paperports._checks import check_int
from paperports._imports import require
from paperports.integrations.sb3.policies import ObservationalDropoutPolicy

__all__ = ["RayEvaluator", "check_ray_address"]


# HTTP/2's client connection preface and an empty SETTINGS frame: a Ray cluster's endpoints
# (the GCS at host:port, the Ray Client server at ray://host:port) are gRPC servers, which
# answer with a SETTINGS frame of their own (frame type 4, the fourth byte of its header).
_HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])
_SETTINGS = 4


def _local_default(who: str, address: str, why: str) -> ValueError:
    return ValueError(
        f"{who}: no Ray cluster answers at ray_address={address!r} ({why}); "
        "ray_address=None starts a local Ray on this machine instead"
    )


def _speaks_http2(connection: socket.socket) -> bool:
    """Whether the server at the other end answers HTTP/2's preface with its SETTINGS."""
    connection.settimeout(3.0)
    connection.sendall(_HTTP2_PREFACE)
    header = b""
    while len(header) < 4:
        chunk = connection.recv(4 - len(header))
        if not chunk:  # it hung up
            return False
        header += chunk
    return header[3] == _SETTINGS


def check_ray_address(address: Any, who: str) -> str | None:
    """``None``, ``"auto"``/``"local"``, or a ``host:port`` (optionally ``ray://``) where a
    gRPC server answers; anything else is refused naming the address, before Ray waits on
    it (Ray retries an address for minutes, and one that answers in another protocol, a
    dashboard's port say, for as long)."""
    if address is None:
        return None
    if not isinstance(address, str) or not address:
        raise TypeError(
            f"{who}: ray_address must be None (start a local Ray) or a Ray address string, "
            f"got {address!r}"
        )
    if address in ("auto", "local"):
        return address
    host_port = address.removeprefix("ray://")
    host, _, port = host_port.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(
            f"{who}: ray_address must be 'host:port', 'ray://host:port' or 'auto', got "
            f"{address!r}; ray_address=None starts a local Ray"
        )
    # with TLS (Ray's RAY_USE_TLS) the endpoints expect a TLS handshake first: only the
    # connection is checked then
    tls = os.environ.get("RAY_USE_TLS", "0").lower() in ("1", "true")
    try:
        with socket.create_connection((host, int(port)), timeout=3.0) as connection:
            grpc = tls or _speaks_http2(connection)
    except OSError as err:
        raise _local_default(who, address, str(err)) from err
    if not grpc:
        raise _local_default(who, address, "something answers there, but not a Ray (gRPC) server")
    return address


def _evaluate_block(
    policy: ObservationalDropoutPolicy,
    candidates: np.ndarray,
    make_env: Callable[[], gym.Env[Any, Any]],
    seeds: list[int],
    max_steps: int,
) -> np.ndarray:
    """One worker's share: :func:`population_returns` on a block of candidates, one thread
    (the workers share the machine's cores)."""
    import torch

    from paperports.integrations.sb3.evolution import population_returns

    torch.set_num_threads(1)
    return population_returns(policy, candidates, make_env, seeds, max_steps)


class RayEvaluator:
    """Evaluate populations on ``workers`` Ray workers (see the module).

    Args:
        policy: The policy whose acting parameters the candidates are.
        make_env: Builds the wrapped environment (importable by the workers).
        workers: How many blocks a population is split into (and CPUs of a local Ray).
        address: ``None`` for a local Ray, or a running cluster's address.

    Use it as a context manager, or call :meth:`close`; a Ray that this evaluator started is
    shut down then, one that was already running is left running.
    """

    def __init__(
        self,
        policy: ObservationalDropoutPolicy,
        make_env: Callable[[], gym.Env[Any, Any]],
        workers: int,
        address: str | None = None,
    ) -> None:
        who = "RayEvaluator"
        self.workers = check_int("workers", workers, minimum=1, who=who)
        address = check_ray_address(address, who)
        require("es", "ray", feature="the ES route's Ray workers")
        import ray

        self._ray = ray
        self._started = not ray.is_initialized()
        if self._started:
            if address is None:
                ray.init(
                    num_cpus=self.workers,
                    include_dashboard=False,
                    log_to_driver=False,
                    configure_logging=False,
                )
            else:
                try:
                    ray.init(address=address, log_to_driver=False, configure_logging=False)
                except ConnectionError as err:  # "auto" where no cluster runs, for one
                    raise _local_default(who, address, str(err)) from err
        self._task = ray.remote(num_cpus=1)(_evaluate_block)
        self._policy = ray.put(policy)
        self._make_env = ray.put(make_env)

    def __call__(self, candidates: np.ndarray, seeds: list[int], max_steps: int) -> np.ndarray:
        """The mean return of each candidate over ``seeds``, as
        :func:`~paperports.integrations.sb3.evolution.population_returns` gives it."""
        blocks = np.array_split(np.asarray(candidates), min(self.workers, len(candidates)))
        futures = [
            self._task.remote(self._policy, block, self._make_env, list(seeds), max_steps)
            for block in blocks
        ]
        return np.concatenate(self._ray.get(futures))

    def close(self) -> None:
        """Shut down the Ray this evaluator started (if it started one)."""
        if self._started and self._ray.is_initialized():
            self._ray.shutdown()
        self._started = False

    def __enter__(self) -> RayEvaluator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
