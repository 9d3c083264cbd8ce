"""Pages on a Ray cluster: one model-holding actor per GPU (or per CPU worker slot), pages as tasks.

Each actor is a :class:`~mudiff_viz.corpus.worker.PageDecoder`, the object the in-process runner
uses, so both paths produce the same rows. The driver keeps two pages in flight per actor, hands a
finished actor its next page and streams every result back to the store as it arrives. File bytes
go into the object store once per file. Ray is imported only here, when ``--ray`` is given.

Start-up touches no network beyond the cluster itself: usage statistics are off, the dashboard is
not started, and an address is probed with a plain TCP connection first (Ray itself would retry an
unreachable address for minutes).
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Callable, Iterable, Iterator

from mudiff_viz.core.errors import ModelLoadError, UserInputError
from mudiff_viz.core.extras import require
from mudiff_viz.corpus.rows import one_line_error
from mudiff_viz.corpus.worker import DecodeConfig, PageDecoder, PageTask, Rows, process_usage, task_failed

PACKAGE_ROOT = Path(__file__).resolve().parents[2]  # workers import mudiff_viz and models from here
IN_FLIGHT = 2  # pages queued per actor: the next page is there when one finishes
OBJECT_STORE_MB = 512  # a local instance's shared memory (file bytes and results only)


class DecodeActor:
    """The Ray actor: a PageDecoder that loads its models once."""

    def __init__(self, config: DecodeConfig):
        self.decoder = PageDecoder(config)

    def ready(self) -> bool:
        self.decoder.load_models()
        return True

    def decode(self, task: PageTask, data: bytes) -> Rows:
        return self.decoder.decode(task, data)

    def usage(self) -> dict:
        return process_usage()


def probe_address(address: str, timeout_s: float = 5.0) -> None:
    """Fail fast, in one line, when nothing listens at a cluster address (``host:port`` or
    ``ray://host:port``)."""
    hostport = address.split("://", 1)[-1]
    host, _, port = hostport.rpartition(":")
    if not host or not port.isdigit():
        raise UserInputError(f"bad Ray address {address!r}: use auto, local, HOST:PORT or ray://HOST:PORT")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s).close()
    except OSError as exc:
        raise UserInputError(f"cannot reach the Ray cluster at {address}: {exc.strerror or exc}") from None


def runtime_env() -> dict:
    """Workers find this package and stay offline like the driver."""
    env = {"PYTHONPATH": os.pathsep.join(p for p in (str(PACKAGE_ROOT), os.environ.get("PYTHONPATH", "")) if p),
           "RAY_USAGE_STATS_ENABLED": "0"}
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "MUDIFF_DEVICE"):
        if name in os.environ:
            env[name] = os.environ[name]
    return {"env_vars": env}


def connect(address: str, local_cpus: int) -> bool:
    """Join the cluster at ``address`` ("auto": the one ``ray start`` runs on this machine, else a new
    local instance; "local": always a new local instance with ``local_cpus`` CPUs). Returns whether
    this call connected (and so should disconnect at the end)."""
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    ray = require("ray", "a corpus run on several workers (--workers)")

    if ray.is_initialized():
        return False
    common = {"include_dashboard": False, "log_to_driver": False, "runtime_env": runtime_env()}
    local = {**common, "num_cpus": local_cpus, "object_store_memory": OBJECT_STORE_MB * 1024 * 1024}
    if address == "local":
        ray.init(**local)
    elif address == "auto":
        try:
            ray.init(address="auto", **common)
        except ConnectionError:  # no cluster on this machine
            ray.init(**local)
    else:
        probe_address(address)
        try:
            ray.init(address=address, **common)
        except Exception as exc:
            raise UserInputError(f"cannot connect to the Ray cluster at {address}: {one_line_error(exc)}") from None
    return True


def plan_actors(workers: int | None, threads: int) -> tuple[int, float, int]:
    """(actors, GPUs per actor, CPUs per actor): one actor per GPU when the cluster has GPUs, else
    one per ``threads`` CPUs; ``workers`` overrides the count."""
    import ray

    resources = ray.cluster_resources()
    gpus = int(resources.get("GPU", 0))
    if gpus:
        n = workers or gpus
        return n, (1.0 if n <= gpus else gpus / n), threads
    n = workers or max(1, int(resources.get("CPU", 1)) // threads)
    return n, 0.0, threads


class RayPool:
    """Actors that decode pages; :meth:`run` streams each finished page to ``on_result``."""

    def __init__(self, config: DecodeConfig, workers: int | None):
        import ray

        self.ray = ray
        n, gpus, cpus = plan_actors(workers, config.threads)
        remote = ray.remote(num_cpus=cpus, num_gpus=gpus, max_restarts=-1, max_task_retries=0)(DecodeActor)
        self.config = config
        self.actors = [remote.remote(config) for _ in range(n)]
        try:
            ray.get([a.ready.remote() for a in self.actors])
        except Exception as exc:  # a model that cannot load fails every actor alike: say it once
            raise ModelLoadError(f"a Ray worker could not load the models: {one_line_error(_cause(exc))}") from None

    def run(self, tasks: Iterable[PageTask], data_ref: Callable[[PageTask], object],
            on_result: Callable[[PageTask, Rows], None]) -> None:
        """Decode every task; ``data_ref(task)`` gives the object-store reference of its file."""
        queue: Iterator[PageTask] = iter(tasks)
        pending: dict = {}

        def submit(actor) -> None:
            task = next(queue, None)
            if task is not None:
                pending[actor.decode.remote(task, data_ref(task))] = (task, actor)

        for actor in self.actors:
            for _ in range(IN_FLIGHT):
                submit(actor)
        while pending:
            (ref,), _ = self.ray.wait(list(pending), num_returns=1)
            task, actor = pending.pop(ref)
            try:
                rows = self.ray.get(ref)
            except Exception as exc:  # the worker died mid-page (Ray restarts it): that page fails alone
                rows = task_failed(self.config, task, f"worker failed: {one_line_error(_cause(exc))}")
            on_result(task, rows)
            submit(actor)

    def usage(self) -> list[dict]:
        """Each actor's peak memory and CPU seconds."""
        return self.ray.get([a.usage.remote() for a in self.actors])


def _cause(exc: BaseException) -> BaseException:
    """The worker's own exception inside a Ray error, when it carries one."""
    return getattr(exc, "cause", None) or exc
