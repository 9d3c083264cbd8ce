"""The Trace: everything one decode did, as plain versioned data.

Samplers write it; views, the player, metrics and the CLI only read it. A saved trace replays with
no model loaded. JSON is compact: per-step arrays, probabilities rounded to 4 significant digits.

Clock and counting conventions (see docs/trace.md):

- ``steps``: one record per (region, denoising forward). ``steps[i].nfe`` is the index of the
  forward pass on the shared clock: regions decoded in one batched call share it.
- ``metrics.nfe`` = ``len(steps)`` + ``metrics.commit_passes`` (the extra forward per block that
  stores the finished block in the KV cache; 0 for AR). It counts forwards per sequence, so
  batching does not inflate ``tokens_per_forward``.
- Times are seconds since the request started; ``metrics.prefill_s`` is the vision encoder plus
  prompt prefill, ``metrics.decode_s`` the rest.
- ``tokens`` of a region run up to and including the stop token (``stop: true``); ``text`` excludes
  it. Positions decoded after the stop (block filler) appear in ``steps`` only.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from mudiff_viz.core.errors import UserInputError
from mudiff_viz.core.limits import Limits, current

SCHEMA_VERSION = 1
TOPK = 5


def rnd(x: float) -> float:
    """Round a probability or time to 4 significant digits (compact JSON, float16-like precision)."""
    return float(f"{x:.4g}")


@dataclass
class TokenRecord:
    text: str
    id: int
    commit_step: int  # the clock (forward index) at which it was committed
    commit_time_s: float
    confidence: float
    box: list[float] | None = None
    stop: bool = False


@dataclass
class RegionRecord:
    bbox: list[float]
    text: str = ""
    tokens: list[TokenRecord] = field(default_factory=list)
    gt_text: str | None = None
    kind: str = "text"  # text | title | table | formula | ... (layout type)
    n_generated: int = 0  # positions decoded, including filler after the stop
    prefill_s: float = 0.0


@dataclass
class StepRecord:
    nfe: int
    region: int
    block: int
    time_s: float
    positions: list[int]
    candidates: list[int]
    confidences: list[float]
    committed: list[int]  # 1 where the position was committed at this step, aligned with positions
    topk: list[list[list[float]]]  # per position: [[id, p], ...] best first
    forced: int = 0  # positions force-committed at the step limit (MASK sampled)


@dataclass
class Trace:
    decoder: str  # "diffusion" | "ar"
    model: dict
    params: dict
    page: dict
    text: str
    metrics: dict
    regions: list[RegionRecord]
    steps: list[StepRecord]
    gt_text: str | None = None
    vocab: dict[str, str] = field(default_factory=dict)  # id -> display text for ids in topk
    schema_version: int = SCHEMA_VERSION

    # ---- derived views -------------------------------------------------------------------------

    @property
    def n_tokens(self) -> int:
        return sum(len(r.tokens) for r in self.regions)

    @property
    def clock_length(self) -> int:
        return 1 + max((s.nfe for s in self.steps), default=-1)

    def token_text(self, token_id: int) -> str:
        return self.vocab.get(str(token_id), f"<{token_id}>")

    # ---- JSON --------------------------------------------------------------------------------

    def to_dict(self) -> dict:
        d = asdict(self)
        d = {"schema_version": d.pop("schema_version"), **d}
        return d

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), separators=(",", ":"), allow_nan=False)

    def save(self, path: str | Path) -> int:
        """Write compact JSON; returns the number of bytes written."""
        data = self.to_json().encode()
        Path(path).write_bytes(data)
        return len(data)

    @staticmethod
    def from_dict(d: Any) -> "Trace":
        validate(d)
        return Trace(
            decoder=d["decoder"],
            model=d["model"],
            params=d["params"],
            page=d["page"],
            text=d["text"],
            metrics=d["metrics"],
            regions=[
                RegionRecord(
                    bbox=r["bbox"], text=r["text"], gt_text=r.get("gt_text"), kind=r.get("kind", "text"),
                    n_generated=r.get("n_generated", len(r["tokens"])), prefill_s=r.get("prefill_s", 0.0),
                    tokens=[TokenRecord(**t) for t in r["tokens"]],
                )
                for r in d["regions"]
            ],
            steps=[StepRecord(**s) for s in d["steps"]],
            gt_text=d.get("gt_text"),
            vocab=d.get("vocab", {}),
            schema_version=d["schema_version"],
        )

    @staticmethod
    def load(path: str | Path, limits: Limits | None = None) -> "Trace":
        limits = limits or current()
        path = Path(path)
        if not path.is_file():
            raise UserInputError(f"no such trace file: {path}")
        size = path.stat().st_size
        if size > limits.max_trace_bytes:
            raise UserInputError(f"trace file too large: {size} bytes (limit {limits.max_trace_bytes})")
        return Trace.loads(path.read_bytes(), limits)

    @staticmethod
    def loads(data: str | bytes, limits: Limits | None = None) -> "Trace":
        limits = limits or current()
        if len(data) > limits.max_trace_bytes:
            raise UserInputError(f"trace too large: {len(data)} bytes (limit {limits.max_trace_bytes})")
        check_depth(data, limits.max_trace_depth)
        try:
            obj = json.loads(data)
        except (ValueError, RecursionError) as exc:
            raise UserInputError(f"trace is not valid JSON: {exc}") from None
        _flat_numbers(obj, "")  # NaN / Infinity anywhere, named by its path
        return Trace.from_dict(obj)


def check_depth(data: str | bytes, max_depth: int) -> None:
    """Refuse deeply nested JSON before parsing it (brackets outside strings)."""
    text = data.decode("utf-8", errors="replace") if isinstance(data, bytes) else data
    depth = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            if depth > max_depth:
                raise UserInputError(f"trace is nested deeper than {max_depth} levels")
        elif ch in "]}":
            depth -= 1


# ---- validation ------------------------------------------------------------------------------


def _fail(path: str, msg: str) -> None:
    raise UserInputError(f"invalid trace: field '{path}' {msg}")


def _num(v: Any, path: str, integer: bool = False, allow_none: bool = False) -> None:
    if v is None and allow_none:
        return
    if isinstance(v, bool) or not isinstance(v, (int, float)) or (integer and not isinstance(v, int)):
        _fail(path, f"must be {'an integer' if integer else 'a number'}, got {type(v).__name__}")
    if isinstance(v, float) and not math.isfinite(v):
        _fail(path, "must be finite")


def _str(v: Any, path: str, allow_none: bool = False) -> None:
    if v is None and allow_none:
        return
    if not isinstance(v, str):
        _fail(path, f"must be a string, got {type(v).__name__}")


def _list(v: Any, path: str) -> list:
    if not isinstance(v, list):
        _fail(path, f"must be a list, got {type(v).__name__}")
    return v


def _dict(v: Any, path: str) -> dict:
    if not isinstance(v, dict):
        _fail(path, f"must be an object, got {type(v).__name__}")
    return v


def _box(v: Any, path: str, allow_none: bool = False) -> None:
    if v is None and allow_none:
        return
    _list(v, path)
    if len(v) != 4:
        _fail(path, f"must have 4 numbers, got {len(v)}")
    for i, x in enumerate(v):
        _num(x, f"{path}[{i}]")


def _flat_numbers(obj: Any, path: str) -> None:
    """Every number anywhere below must be finite (free-form dicts like params and metrics)."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            _flat_numbers(v, f"{path}.{k}" if path else str(k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            _flat_numbers(v, f"{path}[{i}]")
    elif isinstance(obj, float) and not math.isfinite(obj):
        _fail(path, f"is {obj}: non-finite numbers are not allowed")


TOKEN_FIELDS = {"text": str, "id": int, "commit_step": int, "commit_time_s": float, "confidence": float}
STEP_ARRAYS = ("positions", "candidates", "confidences", "committed", "topk")


def validate(d: Any) -> None:
    """Check a trace object; raises UserInputError naming the first bad field."""
    _dict(d, "trace")
    if "schema_version" not in d:
        _fail("schema_version", "is missing")
    if d["schema_version"] != SCHEMA_VERSION:
        _fail("schema_version", f"is {d['schema_version']!r}; this version reads {SCHEMA_VERSION}")
    for key in ("decoder", "model", "params", "page", "text", "metrics", "regions", "steps"):
        if key not in d:
            _fail(key, "is missing")
    if d["decoder"] not in ("diffusion", "ar"):
        _fail("decoder", f"must be 'diffusion' or 'ar', got {d['decoder']!r}")
    for key in ("model", "params", "page", "metrics"):
        _flat_numbers(_dict(d[key], key), key)
    _str(d["text"], "text")
    _str(d.get("gt_text"), "gt_text", allow_none=True)
    page = d["page"]
    for key in ("width", "height"):
        if key not in page:
            _fail(f"page.{key}", "is missing")
        _num(page[key], f"page.{key}")
        if page[key] <= 0:
            _fail(f"page.{key}", "must be positive")
    vocab = _dict(d.get("vocab", {}), "vocab")
    for k, v in vocab.items():
        _str(v, f"vocab.{k}")
    regions = _list(d["regions"], "regions")
    # clock values index per-forward arrays in the viewers: bound them by the work the trace holds
    n_tokens = sum(len(r["tokens"]) for r in regions if isinstance(r, dict) and isinstance(r.get("tokens"), list))
    clock_limit = 2 * (len(d["steps"]) if isinstance(d["steps"], list) else 0) + 2 * n_tokens + 16
    for ri, r in enumerate(regions):
        p = f"regions[{ri}]"
        _dict(r, p)
        for key in ("bbox", "text", "tokens"):
            if key not in r:
                _fail(f"{p}.{key}", "is missing")
        _box(r["bbox"], f"{p}.bbox")
        _str(r["text"], f"{p}.text")
        _str(r.get("gt_text"), f"{p}.gt_text", allow_none=True)
        _str(r.get("kind", "text"), f"{p}.kind")
        _num(r.get("n_generated", 0), f"{p}.n_generated", integer=True)
        _num(r.get("prefill_s", 0.0), f"{p}.prefill_s")
        for ti, t in enumerate(_list(r["tokens"], f"{p}.tokens")):
            tp = f"{p}.tokens[{ti}]"
            _dict(t, tp)
            for key, typ in TOKEN_FIELDS.items():
                if key not in t:
                    _fail(f"{tp}.{key}", "is missing")
                if typ is str:
                    _str(t[key], f"{tp}.{key}")
                else:
                    _num(t[key], f"{tp}.{key}", integer=typ is int)
            if not 0 <= t["commit_step"] <= clock_limit:
                _fail(f"{tp}.commit_step", f"is {t['commit_step']}: must be in 0..{clock_limit}")
            if not 0.0 <= t["confidence"] <= 1.0:
                _fail(f"{tp}.confidence", "must be in [0, 1]")
            _box(t.get("box"), f"{tp}.box", allow_none=True)
            if not isinstance(t.get("stop", False), bool):
                _fail(f"{tp}.stop", "must be true or false")
            extra = set(t) - set(TOKEN_FIELDS) - {"box", "stop"}
            if extra:
                _fail(f"{tp}.{sorted(extra)[0]}", "is not a token field")
    n_regions = len(regions)
    for si, s in enumerate(_list(d["steps"], "steps")):
        sp = f"steps[{si}]"
        _dict(s, sp)
        for key in ("nfe", "region", "block", "time_s", *STEP_ARRAYS):
            if key not in s:
                _fail(f"{sp}.{key}", "is missing")
        _num(s["nfe"], f"{sp}.nfe", integer=True)
        if not 0 <= s["nfe"] <= clock_limit:
            _fail(f"{sp}.nfe", f"is {s['nfe']}: must be in 0..{clock_limit}")
        _num(s["region"], f"{sp}.region", integer=True)
        _num(s["block"], f"{sp}.block", integer=True)
        _num(s["time_s"], f"{sp}.time_s")
        _num(s.get("forced", 0), f"{sp}.forced", integer=True)
        if not 0 <= s["region"] < n_regions:
            _fail(f"{sp}.region", f"is {s['region']}, but there are {n_regions} regions")
        n = len(_list(s["positions"], f"{sp}.positions"))
        for key in STEP_ARRAYS[1:]:
            if len(_list(s[key], f"{sp}.{key}")) != n:
                _fail(f"{sp}.{key}", f"has {len(s[key])} entries but positions has {n}")
        for i in range(n):
            _num(s["positions"][i], f"{sp}.positions[{i}]", integer=True)
            _num(s["candidates"][i], f"{sp}.candidates[{i}]", integer=True)
            _num(s["confidences"][i], f"{sp}.confidences[{i}]")
            if s["committed"][i] not in (0, 1):
                _fail(f"{sp}.committed[{i}]", "must be 0 or 1")
            for j, pair in enumerate(_list(s["topk"][i], f"{sp}.topk[{i}]")):
                _list(pair, f"{sp}.topk[{i}][{j}]")
                if len(pair) != 2:
                    _fail(f"{sp}.topk[{i}][{j}]", "must be [id, probability]")
                _num(pair[0], f"{sp}.topk[{i}][{j}][0]", integer=True)
                _num(pair[1], f"{sp}.topk[{i}][{j}][1]")
        extra = set(s) - {"nfe", "region", "block", "time_s", "forced", *STEP_ARRAYS}
        if extra:
            _fail(f"{sp}.{sorted(extra)[0]}", "is not a step field")


def check_invariants(trace: Trace) -> list[str]:
    """Semantic checks beyond the schema; returns a list of violations (empty when consistent).

    Each region's tokens are committed exactly once, at the step their record names; AR commits
    one token per step; the NFE count matches the recorded forwards plus block-commit passes.
    """
    problems: list[str] = []
    recorded = bool(trace.params.get("record", True))
    commits: dict[tuple[int, int], int] = {}
    for si, s in enumerate(trace.steps):
        n_commit = sum(s.committed)
        if trace.decoder == "ar" and n_commit != 1:
            problems.append(f"steps[{si}]: AR step commits {n_commit} tokens")
        for pos, c in zip(s.positions, s.committed):
            if c:
                key = (s.region, pos)
                if key in commits:
                    problems.append(f"region {s.region} position {pos} committed twice (steps {commits[key]} and {si})")
                commits[key] = si
    for ri, r in enumerate(trace.regions):
        for ti, t in enumerate(r.tokens):
            if recorded:
                si = commits.get((ri, ti))
                if si is None:
                    problems.append(f"region {ri} token {ti} never committed in steps")
                elif trace.steps[si].nfe != t.commit_step:
                    problems.append(f"region {ri} token {ti}: commit_step {t.commit_step} but committed at clock {trace.steps[si].nfe}")
        if r.text != "".join(t.text for t in r.tokens if not t.stop):
            problems.append(f"region {ri}: text does not match its tokens")
    m = trace.metrics
    if recorded and "nfe" in m and m["nfe"] != len(trace.steps) + m.get("commit_passes", 0):
        problems.append(f"metrics.nfe {m['nfe']} != {len(trace.steps)} steps + {m.get('commit_passes', 0)} commit passes")
    return problems
