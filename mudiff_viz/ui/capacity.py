"""How many decodes the app runs at once, and the queue for work that needs no model.

A decode keeps a CPU core or two busy and holds the model's activations and the page's trace in
memory, so the number of decodes that can run side by side without slowing each other down follows
from the machine: ``cores // CORES_PER_DECODE`` and ``(available memory - MEMORY_RESERVE) //
MEMORY_PER_DECODE``, the smaller of the two, at least 1 and at most :data:`MAX_DECODE_SLOTS`.
``MUDIFF_DECODE_SLOTS`` overrides it (a GPU host, where the cores are not what a decode waits on).

Work that needs no model (page previews and checks, the trace viewer, recorded lesson traces) runs
on :data:`LIGHT_WORK`, a queue of its own, so a visitor whose page number is out of range, or who
replays a trace, never waits behind somebody else's decode.
"""

from __future__ import annotations

import os

CORES_PER_DECODE = 2  # one decode's torch threads plus the server's own work (rendering, payloads)
MEMORY_PER_DECODE = 1536 * 2**20  # a decode's activations, trace and payload, with room (docs/reliability.md)
MEMORY_RESERVE = 1024 * 2**20  # the server, the loaded models and the PDF worker
MAX_DECODE_SLOTS = 4  # beyond this, one host's memory bandwidth is the limit, not its cores
SLOTS_ENV = "MUDIFF_DECODE_SLOTS"

LIGHT_WORK = "light"  # the Gradio concurrency id of model-free work
LIGHT_SLOTS = 4  # model-free calls at once (each takes milliseconds to a second)


def available_memory() -> int:
    """Bytes of memory available to new work (psutil; the total from sysconf when psutil is absent)."""
    try:
        import psutil

        return int(psutil.virtual_memory().available)
    except ImportError:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def usable_cores() -> int:
    """Cores this process may run on (its affinity mask, not the machine's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def derived_slots(cores: int, memory: int) -> int:
    """The decode slots a machine with ``cores`` cores and ``memory`` bytes available supports."""
    by_cores = cores // CORES_PER_DECODE
    by_memory = (memory - MEMORY_RESERVE) // MEMORY_PER_DECODE
    return int(max(1, min(MAX_DECODE_SLOTS, by_cores, by_memory)))


def decode_slots(env: dict | None = None) -> int:
    """Decodes run at once: ``MUDIFF_DECODE_SLOTS`` when set (a whole number >= 1), else derived."""
    raw = (os.environ if env is None else env).get(SLOTS_ENV)
    if raw not in (None, ""):
        try:
            slots = int(raw)
        except ValueError:
            raise ValueError(f"{SLOTS_ENV}={raw!r} is not a whole number") from None
        if slots < 1:
            raise ValueError(f"{SLOTS_ENV}={raw!r}: at least one decode must be able to run")
        return slots
    return derived_slots(usable_cores(), available_memory())


DECODE_SLOTS = decode_slots()  # fixed when the app starts: the Gradio queue and the model slot share it
