"""Load test of the running app: N concurrent gradio_client visitors, each decoding its own pages.

``python -m mudiff_viz loadtest --clients 8 --decodes 25`` starts the app in a child process (its
memory is measured apart from the clients'), then:

1. **Solo references.** Every (page, decoder) the burst will ask for is decoded once, alone, by one
   client: the reference tokens (ids, commit forwards, confidences, region by region).
2. **Warm-up level.** "Warmed" means: the solo runs, then one warm-up burst of the same shape as the
   measured one (every client one decode, all at once), then the heap trimmed (the server trims 2 s
   after its model slots fall free). The server's RSS (with its PDF worker children) then is the
   warm level. A server warmed by one decode has not yet grown what N visitors at once need (their
   sessions, uploads, worker threads' heaps), so against it the first burst looks like a 25% leak;
   against this level the check measures what it says: a second burst leaves nothing behind. The
   RSS after one solo decode is reported too (``rss_one_decode_mb``).
3. **Burst.** N clients at once, each ``--decodes`` decodes of its own pages (distinct PDFs whose
   first line names the client and the page), diffusion and AR in turn. Every answer is checked bit
   for bit against its solo reference (not summaries: every token's id, forward and confidence), and
   that it is about the page sent (page SHA-256). Latency of every request is kept.
4. **After.** RSS sampled every 0.25 s throughout; after the burst it must come back to within 10%
   of the warm-up level (waited for up to ``--settle-s``).

The report (JSON) has latency percentiles, errors, mismatches and the RSS timeline.
"""

from __future__ import annotations

import hashlib
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from mudiff_viz.core.trace import Trace

ROOT = Path(__file__).resolve().parents[2]
RSS_RETURN = 1.10  # RSS after a burst over RSS after the warm-up
TRIM_WAIT_S = 3.0  # longer than the server's idle wait before it trims (ui/slot.py: TRIM_AFTER_S)
DECODE_KNOBS = {"block_length": 8, "steps": 8, "threshold": 0.9, "temperature": 0.0,
                "strategy": "low_confidence_dynamic", "seed": 0}


def page_pdf(client: int, k: int) -> bytes:
    """A small one-page PDF whose first line names the client and the page (its ground truth)."""
    import pymupdf

    doc = pymupdf.open()
    page = doc.new_page(width=400, height=160)
    page.insert_text((20, 40), f"Client {client} page {k}", fontname="helv", fontsize=14)
    page.insert_text((20, 80), f"load test line for client {client}, request {k}.", fontname="cour", fontsize=10)
    data = doc.tobytes()
    doc.close()
    return data


def token_fingerprint(trace: Trace) -> list:
    """What must be equal bit for bit between a loaded run and a solo run (no wall times)."""
    return [[r.text, [[t.id, t.commit_forward, t.confidence] for t in r.tokens]] for r in trace.regions]


class RssSampler(threading.Thread):
    """RSS of a process with its children, every ``every_s``: a (seconds, bytes) timeline."""

    def __init__(self, pid: int, every_s: float = 0.25) -> None:
        super().__init__(daemon=True)
        import psutil

        self.proc = psutil.Process(pid)
        self.every_s = every_s
        self.t0 = time.monotonic()
        self.timeline: list[tuple[float, int]] = []
        self._halt = threading.Event()

    def rss(self) -> int:
        import psutil

        total = 0
        for p in [self.proc, *self.proc.children(recursive=True)]:
            try:
                total += p.memory_info().rss
            except psutil.Error:
                continue
        return total

    def sample(self) -> int:
        value = self.rss()
        self.timeline.append((round(time.monotonic() - self.t0, 2), value))
        return value

    def run(self) -> None:
        while not self._halt.is_set():
            self.sample()
            time.sleep(self.every_s)

    def stop(self) -> None:
        self._halt.set()
        self.join()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(models_dir: str | None = None, threads: int = 1) -> tuple[subprocess.Popen, str]:
    port = free_port()
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), PYTHONPATH=str(ROOT), GRADIO_ANALYTICS_ENABLED="False")
    cmd = [sys.executable, "-c", "import sys; from mudiff_viz.ui.serve import serve; "
           "serve(int(sys.argv[1]), sys.argv[2] or None)", str(port), models_dir or ""]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = proc.stdout.readline()
    if line.strip() != "ready":
        proc.kill()
        raise RuntimeError("the app did not start")
    return proc, f"http://127.0.0.1:{port}/"


def decode(client, path: Path, decoder: str, max_tokens: int) -> Trace:
    from gradio_client import handle_file

    out = client.predict(file=handle_file(str(path)), page_number=1, spec="nano", decoder=decoder,
                         max_new_tokens=max_tokens, api_name="/decode", **DECODE_KNOBS)
    files = out[-1]["value"] if isinstance(out[-1], dict) and "value" in out[-1] else out[-1]
    return Trace.load(files[0])


@dataclass
class LoadReport:
    clients: int
    decodes_per_client: int
    max_tokens: int
    solo_decodes: int = 0
    errors: list[str] = field(default_factory=list)
    mismatches: list[str] = field(default_factory=list)
    latencies_s: list[float] = field(default_factory=list)
    wall_s: float = 0.0
    rss_one_decode_mb: float = 0.0
    rss_warm_mb: float = 0.0
    rss_peak_mb: float = 0.0
    rss_after_mb: float = 0.0
    settle_s: float = 0.0
    timeline: list = field(default_factory=list)

    def percentile(self, q: float) -> float | None:
        if not self.latencies_s:
            return None
        xs = sorted(self.latencies_s)
        return round(xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))], 2)

    @property
    def rss_returned(self) -> bool:
        return self.rss_after_mb <= RSS_RETURN * self.rss_warm_mb

    def summary(self) -> dict:
        return {
            "clients": self.clients, "decodes_per_client": self.decodes_per_client, "max_tokens": self.max_tokens,
            "requests": len(self.latencies_s) + len(self.errors), "solo_decodes": self.solo_decodes,
            "errors": len(self.errors), "mismatches": len(self.mismatches),
            "p50_s": self.percentile(0.5), "p95_s": self.percentile(0.95), "max_s": self.percentile(1.0),
            "mean_s": round(statistics.fmean(self.latencies_s), 2) if self.latencies_s else None,
            "wall_s": round(self.wall_s, 1),
            "decodes_per_s": round(len(self.latencies_s) / self.wall_s, 2) if self.wall_s else None,
            "rss_one_decode_mb": round(self.rss_one_decode_mb), "rss_warm_mb": round(self.rss_warm_mb), "rss_peak_mb": round(self.rss_peak_mb),
            "rss_after_mb": round(self.rss_after_mb), "rss_after_over_warm": round(self.rss_after_mb / self.rss_warm_mb, 3)
            if self.rss_warm_mb else None, "settle_s": round(self.settle_s, 1), "rss_returned": self.rss_returned,
        }


def run_load(url: str, server_pid: int, clients: int = 8, decodes: int = 25, pages_per_client: int = 3,
             max_tokens: int = 24, settle_s: float = 60.0, workdir: Path | None = None) -> LoadReport:
    """The solo references, the burst, the RSS checks (see the module docstring)."""
    from gradio_client import Client

    workdir = Path(workdir or tempfile.mkdtemp(prefix="mudiff-load-"))
    report = LoadReport(clients, decodes, max_tokens)
    pages: dict[tuple[int, int], Path] = {}
    for c in range(clients):
        for k in range(pages_per_client):
            path = workdir / f"client{c}-page{k}.pdf"
            path.write_bytes(page_pdf(c, k))
            pages[(c, k)] = path

    def plan(c: int) -> list[tuple[Path, str]]:
        """Client c's requests: its pages in turn, the decoder switching every round of pages."""
        return [(pages[(c, i % pages_per_client)], ("diffusion", "ar")[(i // pages_per_client) % 2]) for i in range(decodes)]

    wanted = sorted({(str(p), d) for c in range(clients) for p, d in plan(c)})
    solo_client = Client(url, verbose=False)
    sampler = RssSampler(server_pid)
    reference = {}
    for path, decoder in wanted:
        reference[(path, decoder)] = token_fingerprint(decode(solo_client, Path(path), decoder, max_tokens))
        if not report.rss_one_decode_mb:
            report.rss_one_decode_mb = sampler.sample() / 2**20
    report.solo_decodes = len(wanted)

    def warm_up(c: int) -> None:  # the warm-up burst: every client's first request, all at once
        path, decoder = plan(c)[0]
        decode(Client(url, verbose=False), path, decoder, max_tokens)

    with ThreadPoolExecutor(clients) as pool:
        list(pool.map(warm_up, range(clients)))
    time.sleep(TRIM_WAIT_S)  # the server trims its heap once its model slots have been free 2 s
    report.rss_warm_mb = sampler.sample() / 2**20
    sampler.start()

    def one_client(c: int) -> None:
        client = Client(url, verbose=False)
        for i, (path, decoder) in enumerate(plan(c)):
            t0 = time.perf_counter()
            try:
                trace = decode(client, path, decoder, max_tokens)
            except Exception as exc:  # counted, not raised: the load test reports every failure
                report.errors.append(f"client {c} request {i}: {type(exc).__name__}: {str(exc)[:200]}")
                continue
            report.latencies_s.append(time.perf_counter() - t0)
            if trace.page.sha256 != hashlib.sha256(path.read_bytes()).hexdigest():
                report.mismatches.append(f"client {c} request {i}: the trace of another page")
            elif trace.decoder != decoder:
                report.mismatches.append(f"client {c} request {i}: asked for {decoder}, got {trace.decoder}")
            elif token_fingerprint(trace) != reference[(str(path), decoder)]:
                report.mismatches.append(f"client {c} request {i}: tokens differ from the solo run of {path.name} ({decoder})")

    t0 = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        list(pool.map(one_client, range(clients)))
    report.wall_s = time.perf_counter() - t0
    t_end = time.monotonic()
    while time.monotonic() - t_end < settle_s:  # memory comes back, or the time is up
        time.sleep(0.5)
        if sampler.timeline and sampler.timeline[-1][1] / 2**20 <= RSS_RETURN * report.rss_warm_mb:
            break
    report.settle_s = time.monotonic() - t_end
    sampler.stop()
    report.rss_after_mb = sampler.sample() / 2**20
    report.rss_peak_mb = max(v for _, v in sampler.timeline) / 2**20
    report.timeline = [(t, round(v / 2**20)) for t, v in sampler.timeline]
    return report
