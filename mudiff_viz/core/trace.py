"""The Trace: everything one decode did, as plain versioned data.

Samplers write it; views, the player, metrics and the CLI only read it. A saved trace replays with
no model loaded. JSON is compact: per-step arrays, probabilities rounded to 4 significant digits.

The dataclasses below are the one description of the schema: loading builds them from JSON and
validation walks their type hints (:func:`validate`), so a field added here is checked everywhere.
Conventions (docs/trace.md):

- The time axis is the **forward**: the index of a (batched) forward pass on the shared clock.
  ``steps[i].forward`` is the forward that produced a step record; ``tokens[j].commit_forward`` the
  forward that committed a token. Regions decoded in one batched call share the clock.
- ``metrics.nfe`` = ``len(steps)`` + ``metrics.commit_passes``: forwards per sequence (the extra
  forward per block that stores the finished block in the KV cache is a commit pass; 0 for AR).
- Times are seconds since the request started; ``metrics.prefill_s`` is the vision encoder plus
  prompt prefill, ``metrics.decode_s`` the rest.
- ``tokens`` of a region run up to and including the stop token (``stop: true``); ``text`` excludes
  it. Positions decoded after the stop (block filler) appear in ``steps`` only.

Version 1 files (``nfe`` / ``commit_step``, no mask id) load through :func:`upgrade_v1`.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import json
import math
import re
import types
import typing
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mudiff_viz.core.counts import metric_problems
from mudiff_viz.core.errors import UserInputError
from mudiff_viz.core.limits import Limits, current

SCHEMA_VERSION = 3
TOPK = 5

# What a draft-and-verify forward did at a position (StepRecord.verdicts): proposed a draft there for a
# later forward to verify; or verified the draft there: kept it, rejected it (the verifier's own token,
# the record's candidate, is committed instead), or discarded it unverified (it came after a rejected
# draft); or committed the verifier's own token where there was no draft (the bonus token).
DRAFTED, ACCEPTED, REJECTED, DISCARDED, BONUS = range(5)
VERDICTS = ("drafted", "accepted", "rejected", "discarded", "bonus")
COMMITTING = (ACCEPTED, REJECTED, BONUS)  # verdicts that commit a token


def rnd(x: float) -> float:
    """Round a probability or time to 4 significant digits (compact JSON, float16-like precision)."""
    return float(f"{x:.4g}")


def rnd_array(values: "np.ndarray") -> "np.ndarray":
    """:func:`rnd` of every value of an array at once (the step recorder's hot path): scaled by a
    power of ten, rounded to an integer, scaled back, which gives the same double as the decimal
    string where the power of ten is exact (|x| > 1e-19); the rest go through :func:`rnd`."""
    import numpy as np

    a = np.asarray(values, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        scale = 10.0 ** (3 - np.floor(np.log10(np.abs(a))))
        out = np.where(a == 0, 0.0, np.rint(a * scale) / scale)
    exact = (scale <= 1e22) | (a == 0)
    if not exact.all():
        out[~exact] = [rnd(float(x)) for x in a[~exact]]
    return out


def when_set(default: Any = None) -> Any:
    """A field written to JSON only when it is not None (absent from the object otherwise)."""
    return field(default=default, metadata={"when_set": True})


def written_when_set(f: dataclasses.Field) -> bool:
    return bool(f.metadata.get("when_set"))


@dataclass
class ModelRecord:
    name: str
    spec: str
    params_m: float
    mask_id: int | None = None  # the MASK token of a diffusion model (a sampled MASK stays masked)
    exec_mode: str = "eager"  # how the forwards ran: "eager" or "cuda-graphs"


@dataclass
class Occlusion:
    """A word blanked on the page (the occlusion probe): its page box and the text it hid, and where
    that text sits in the ground truth: region index and character span [start, end) of its gt_text."""

    box: list[float]
    text: str
    region: int | None = None
    start: int | None = None
    end: int | None = None


@dataclass
class Skew:
    """How a scan was straightened before its regions were found (mudiff_viz/inputs/scan.py): its
    text ran at ``angle`` degrees (counter-clockwise) on the uploaded image (``width`` x ``height``
    pixels), and the page was turned by ``-angle`` about its centre onto a canvas that holds it all.
    Regions, tokens and steps are on the straightened page; occluded boxes on the upload."""

    angle: float  # degrees, counter-clockwise, the text ran at on the uploaded image
    width: float  # the uploaded image's pixels
    height: float
    relit: float = 0.0  # mean grey levels changed by evening the lighting (0: left as it was)


@dataclass
class PageRecord:
    width: float  # pixels of the rendered page image (all coordinates are in these)
    height: float
    source: str = ""  # the input's file name or sample name
    page_index: int = 0  # which page of a PDF, 0-based (people, the CLI, the app and mv.decode count from 1)
    page_count: int = 1
    dpi: float | None = None  # PDF render resolution (PDF points * dpi / 72 = pixels)
    sha256: str = ""  # of the input file
    exif_orientation: int | None = None  # EXIF tag the image was turned upright by (None: none)
    occluded: list[Occlusion] = field(default_factory=list)
    probes: dict[str, Any] = field(default_factory=dict)  # what was done to the page: shuffle, occlude, degrade
    skew: Skew | None = field(default=None, metadata={"when_set": True})  # written for a straightened scan only


@dataclass
class TokenRecord:
    text: str
    id: int
    commit_forward: int  # the forward that committed it
    commit_time_s: float  # seconds since the request started
    confidence: float  # its probability when committed, in [0, 1]
    box: list[float] | None = None  # [x0, y0, x1, y1] on the page, when it could be placed
    stop: bool = False  # the stop token (text "")


@dataclass
class RegionRecord:
    bbox: list[float]  # [x0, y0, x1, y1] on the page
    text: str = ""  # the decoded text, stop token excluded
    tokens: list[TokenRecord] = field(default_factory=list)
    gt_text: str | None = None  # the region's ground truth (a PDF's text layer, a sample's sidecar)
    kind: str = "text"  # text | title | table | formula | layout | page ...
    n_generated: int = 0  # positions decoded, including filler after the stop
    prefill_s: float = 0.0


@dataclass
class StepRecord:
    forward: int  # the forward on the shared clock that produced this step
    region: int  # index into regions
    block: int  # the region's block being denoised
    time_s: float  # when the forward finished, seconds since the request started
    positions: list[int]  # the block's still-masked positions (absolute, in the region's output)
    candidates: list[int]  # the model's current guess at each position (token ids)
    confidences: list[float]  # each guess's probability
    committed: list[int]  # 1 where the position was committed at this step, aligned with positions
    topk: list[list[list[float]]]  # per position: [[id, p], ...] best first
    forced: int = 0  # positions force-committed at the step limit (MASK sampled)
    # draft and verify (decoding/speculative.py); a position may appear twice: verified, then drafted again
    verdicts: list[int] | None = when_set()  # per position: DRAFTED, ACCEPTED, REJECTED, DISCARDED or BONUS
    drafts: list[int] | None = when_set()  # per position: the draft token this forward verified there (-1: none)
    role: str | None = when_set()  # "verifier": the trace's verifier model ran this forward (else its model)


@dataclass
class Metrics(Mapping):
    """Counts and times of a decode (built once, by ``decoding/build.py: run_metrics``).

    Attributes are typed; the object also reads like the JSON it is written as (``m["nfe"]``,
    ``m.get("cer")``, ``"truncated" in m``, ``dict(m)``): the keys are the fields that are present,
    a :func:`when_set` field only when it is set.
    """

    nfe: int  # forwards per sequence: denoising forwards + commit_passes
    commit_passes: int  # one per (region, block): the forward that stores a finished block (0 for AR)
    batched_forwards: int  # model calls (a batched forward over many regions counts once)
    tokens: int  # tokens committed, stop tokens included
    text_chars: int  # characters of text
    tokens_per_forward: float  # tokens / nfe
    wall_s: float  # the whole request, seconds
    prefill_s: float  # vision encoder + prompt prefill
    decode_s: float  # wall_s - prefill_s
    time_to_first_token_s: float  # the first commit's time
    recording_s: float | None = when_set()  # seconds of wall_s spent making step records (absent: not recorded)
    regions_decoded: int | None = when_set()  # per-region decodes merged into this trace (decoding/sequential.py)
    draft_forwards: int | None = when_set()  # draft and verify: forwards (per sequence) that drafted ...
    verify_forwards: int | None = when_set()  # ... and that verified (a self-speculative forward does both; nfe counts it once)
    drafted: int | None = when_set()  # drafts verified (discarded ones included)
    accepted: int | None = when_set()  # drafts kept
    anchor_hits: int | None = when_set()  # forwards whose next drafts came from an anchored (runner-up) branch
    cer: float | None = when_set()  # against gt_text, when the page has a ground truth
    truncated: str | None = when_set()  # why the decode stopped early: a time limit, or "cut at N tokens"

    def __getitem__(self, key: str) -> Any:
        f = self.__dataclass_fields__.get(key) if isinstance(key, str) else None
        value = getattr(self, key) if f is not None else None
        if f is None or (value is None and written_when_set(f)):
            raise KeyError(key)
        return value

    def __iter__(self) -> Iterator[str]:
        return (f.name for f in dataclasses.fields(self) if not (written_when_set(f) and getattr(self, f.name) is None))

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def to_dict(self) -> dict[str, Any]:
        """The JSON object: fields in order, unset :func:`when_set` fields left out."""
        return {k: self[k] for k in self}


def gunzip_bounded(data: bytes, limit: int) -> bytes:
    """A gzipped trace unpacked, refused past ``limit`` bytes (a small file must not unpack to gigabytes)."""
    import gzip
    import io
    import zlib

    try:
        with gzip.GzipFile(fileobj=io.BytesIO(data)) as f:
            out = f.read(limit + 1)
    except (OSError, EOFError, zlib.error) as exc:
        raise UserInputError(f"trace is gzipped but cannot be unpacked: {exc}") from None
    if len(out) > limit:
        raise UserInputError(f"trace unpacks to more than {limit} bytes (the trace size limit)")
    return out


# Filled by mudiff_viz/__init__.py (runs before any module of the package): the notebook layer's
# frame builders and player, so core imports nothing above it.
NOTEBOOK_HOOKS: dict[str, Any] = {}


@dataclass
class Trace:
    decoder: str  # a registered decoder: "diffusion" | "ar"
    model: ModelRecord
    params: dict[str, Any]  # the knobs the decoder read (decoding/settings.py: KNOBS) and what the loop adds
    page: PageRecord
    text: str  # the content regions' text joined by newlines
    metrics: Metrics
    regions: list[RegionRecord]
    steps: list[StepRecord]  # one per (region, denoising forward); empty when recorded without steps
    gt_text: str | None = None  # the page's ground truth when every region has one
    vocab: dict[str, str] = field(default_factory=dict)  # id -> display text for ids in tokens and top-k
    verifier: ModelRecord | None = when_set()  # the speculative decoder's AR verifier (``model`` drafted)
    schema_version: int = SCHEMA_VERSION

    # ---- derived views -------------------------------------------------------------------------

    @property
    def n_tokens(self) -> int:
        return sum(len(r.tokens) for r in self.regions)

    @property
    def is_autoregressive(self) -> bool:
        """One token per forward, no blocks (the AR decoder)."""
        return self.decoder == "ar"

    @property
    def is_speculative(self) -> bool:
        """Drafts verified (the draft-and-verify decoders): steps carry verdicts."""
        return self.metrics.verify_forwards is not None

    @property
    def block_length(self) -> int | None:
        """Block length of a block-wise decode; None for AR."""
        return None if self.is_autoregressive else self.params.get("block_length")

    @property
    def clock_length(self) -> int:
        """Forwards on the shared clock: up to the last step record or token commit."""
        last = max((s.forward for s in self.steps), default=-1)
        return 1 + max([last] + [t.commit_forward for r in self.regions for t in r.tokens])

    def token_text(self, token_id: int) -> str:
        return self.vocab.get(str(token_id), f"<{token_id}>")

    # ---- in a notebook: frames and the inline player live above core (mudiff_viz/notebook) -----

    def tokens_frame(self, **key: Any) -> Any:
        """One row per token as a pandas DataFrame: the corpus tokens table's columns (docs/notebook.md)."""
        return NOTEBOOK_HOOKS["tokens_frame"](self, **key)

    def steps_frame(self, **key: Any) -> Any:
        """One row per (step, masked position) as a pandas DataFrame (docs/notebook.md)."""
        return NOTEBOOK_HOOKS["steps_frame"](self, **key)

    def save_gif(self, path: str | Path, **options: Any) -> int:
        """The decode as an animated GIF (page, overlay, text; ``width``, ``fps``, ``clock``...); returns bytes."""
        return NOTEBOOK_HOOKS["save_gif"](self, path, **options)

    def save_mp4(self, path: str | Path, **options: Any) -> int:
        """The decode as an MP4 video (needs the ``video`` extra); returns bytes written."""
        return NOTEBOOK_HOOKS["save_mp4"](self, path, **options)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> Any:
        return NOTEBOOK_HOOKS["mimebundle"](self)

    # ---- JSON --------------------------------------------------------------------------------

    def to_dict(self) -> dict:
        d = _as_json(self)
        return {"schema_version": d.pop("schema_version"), **d}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), separators=(",", ":"), allow_nan=False)

    def save(self, path: str | Path) -> int:
        """Write compact JSON; returns the number of bytes written."""
        data = self.to_json().encode()
        Path(path).write_bytes(data)
        return len(data)

    @staticmethod
    def from_dict(d: Any) -> "Trace":
        """Validate (upgrading versions 1 and 2) and build."""
        if isinstance(d, dict) and d.get("schema_version") == 1:
            d = upgrade_v1(d)
        if isinstance(d, dict) and d.get("schema_version") == 2:
            d = {**d, "schema_version": SCHEMA_VERSION}  # version 3 only added optional fields
        validate(d)
        return _build(Trace, d)

    @staticmethod
    def load(path: str | Path, limits: Limits | None = None) -> "Trace":
        limits = limits or current()
        path = Path(path)
        if not path.is_file():
            raise UserInputError(f"no such trace file: {path}")
        size = path.stat().st_size
        if size > limits.max_trace_bytes:
            raise UserInputError(f"trace file too large: {size} bytes (limit {limits.max_trace_bytes})")
        data = path.read_bytes()
        if data[:2] == b"\x1f\x8b":  # gzipped (the lessons' recordings): unpacked within the same size limit
            data = gunzip_bounded(data, limits.max_trace_bytes)
        return Trace.loads(data, limits)

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
        _finite(obj, "")  # NaN / Infinity anywhere, named by its path
        trace = Trace.from_dict(obj)
        check_meaning(trace, limits)
        return trace


def clock_bound(n_steps: int, n_tokens: int) -> int:
    """The longest clock (forwards) a trace with this many step records and tokens can have.

    A real clock has at most one forward per step record, plus one per committed token (traces
    recorded without steps) and per block commit. Viewers allocate per-forward arrays, so a clock
    value at or past this bound is refused: a tiny file must not claim a clock of 10^9.
    """
    return 2 * (n_steps + n_tokens) + 16


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


def _as_json(obj: Any) -> Any:
    """A record as plain JSON data (``dataclasses.asdict``, but :func:`when_set` fields that are not
    set are left out rather than written as null)."""
    if dataclasses.is_dataclass(obj):
        return {f.name: _as_json(v) for f in dataclasses.fields(obj)
                if not ((v := getattr(obj, f.name)) is None and written_when_set(f))}
    if isinstance(obj, list):
        if obj and isinstance(obj[0], (int, float, str)):  # a flat list of numbers or strings: as it is
            return list(obj)
        return [_as_json(v) for v in obj]
    if isinstance(obj, dict):
        return {k: _as_json(v) for k, v in obj.items()}
    return obj


# ---- building records from JSON ---------------------------------------------------------------------


@functools.cache
def _hints(cls) -> dict[str, Any]:
    """A record's field types (resolved once per class: resolving is most of a load's time)."""
    return typing.get_type_hints(cls)


def _build(hint: Any, value: Any) -> Any:
    """JSON (already validated) -> the dataclasses named by ``hint``."""
    if dataclasses.is_dataclass(hint):
        hints = _hints(hint)
        return hint(**{k: _build(hints[k], v) for k, v in value.items()})
    origin = typing.get_origin(hint)
    if origin is list and value is not None:
        (item,) = typing.get_args(hint)
        return [_build(item, v) for v in value]
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in typing.get_args(hint) if a is not type(None)]
        return None if value is None else _build(inner[0], value)
    return value


# ---- validation ------------------------------------------------------------------------------


def _fail(path: str, msg: str) -> typing.NoReturn:
    """A one-line error. The path may hold an upload's own keys (any characters): its non-printable
    characters are shown escaped, so a key like "\\n" cannot break the line."""
    shown = "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in path)
    raise UserInputError(f"invalid trace: field '{shown}' {msg}")


def _finite(obj: Any, path: str) -> None:
    """Every number anywhere below must be finite."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            _finite(v, f"{path}.{k}" if path else str(k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            _finite(v, f"{path}[{i}]")
    elif isinstance(obj, float) and not math.isfinite(obj):
        _fail(path, f"is {obj}: non-finite numbers are not allowed")


_TYPE_NAMES = {int: "an integer", float: "a number", str: "a string", bool: "true or false"}


def _check(value: Any, hint: Any, path: str) -> None:
    """``value`` (parsed JSON) against a type hint of the schema dataclasses."""
    if hint is Any:
        _finite(value, path)
        return
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(hint)
        if value is None and type(None) in args:
            return
        inner = [a for a in args if a is not type(None)]
        _check(value, inner[0], path)
        return
    if dataclasses.is_dataclass(hint):
        _check_record(value, hint, path)
        return
    if origin is list:
        if not isinstance(value, list):
            _fail(path, f"must be a list, got {type(value).__name__}")
        (item,) = typing.get_args(hint)
        for i, v in enumerate(value):
            _check(v, item, f"{path}[{i}]")
        return
    if origin is dict:
        if not isinstance(value, dict):
            _fail(path, f"must be an object, got {type(value).__name__}")
        _, item = typing.get_args(hint)
        for k, v in value.items():
            _check(v, item, f"{path}.{k}")
        return
    ok = {
        bool: isinstance(value, bool),
        int: isinstance(value, int) and not isinstance(value, bool),
        float: isinstance(value, (int, float)) and not isinstance(value, bool),
        str: isinstance(value, str),
    }.get(hint)
    if ok is None:
        raise TypeError(f"schema type {hint!r} at {path} has no check")
    if not ok:
        _fail(path, f"must be {_TYPE_NAMES[hint]}, got {type(value).__name__}")
    if hint is float and not math.isfinite(value):
        _fail(path, "must be finite")


def _check_record(value: Any, cls, path: str) -> None:
    if not isinstance(value, dict):
        _fail(path, f"must be an object, got {type(value).__name__}")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    extra = sorted(set(value) - set(fields))
    if extra:
        _fail(f"{path}.{extra[0]}", f"is not a {cls.__name__} field")
    hints = _hints(cls)
    for name, f in fields.items():
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        if name not in value:
            if required:
                _fail(f"{path}.{name}" if path else name, "is missing")
            continue
        _check(value[name], hints[name], f"{path}.{name}" if path else name)


def _box(v: list | None, path: str) -> None:
    if v is not None and len(v) != 4:
        _fail(path, f"must have 4 numbers, got {len(v)}")


def validate(d: Any) -> None:
    """Check a (version 2) trace object; raises UserInputError naming the first bad field.

    Types, required and unknown fields come from the dataclasses; then the rules types cannot
    say: ranges, array lengths, region indices, and clock values bounded by the work the trace
    holds (viewers allocate per-forward arrays: a tiny file must not claim a clock of 10^9).
    """
    if not isinstance(d, dict):
        _fail("trace", f"must be an object, got {type(d).__name__}")
    if "schema_version" not in d:
        _fail("schema_version", "is missing")
    if d["schema_version"] != SCHEMA_VERSION:
        _fail("schema_version", f"is {d['schema_version']!r}; this version reads 1 to {SCHEMA_VERSION}")
    _check_record(d, Trace, "")
    page = d["page"]
    for key in ("width", "height"):
        if page[key] <= 0:
            _fail(f"page.{key}", "must be positive")
    for i, occ in enumerate(page.get("occluded", [])):
        _box(occ["box"], f"page.occluded[{i}].box")
    regions, steps = d["regions"], d["steps"]
    bound = clock_bound(len(steps), sum(len(r["tokens"]) for r in regions))
    for ri, r in enumerate(regions):
        p = f"regions[{ri}]"
        _box(r["bbox"], f"{p}.bbox")
        for ti, t in enumerate(r["tokens"]):
            tp = f"{p}.tokens[{ti}]"
            if not 0 <= t["commit_forward"] < bound:
                _fail(f"{tp}.commit_forward", f"is {t['commit_forward']}: must be in 0..{bound - 1}")
            if not 0.0 <= t["confidence"] <= 1.0:
                _fail(f"{tp}.confidence", "must be in [0, 1]")
            _box(t.get("box"), f"{tp}.box")
    for si, s in enumerate(steps):
        sp = f"steps[{si}]"
        if not 0 <= s["forward"] < bound:
            _fail(f"{sp}.forward", f"is {s['forward']}: must be in 0..{bound - 1}")
        if not 0 <= s["region"] < len(regions):
            _fail(f"{sp}.region", f"is {s['region']}, but there are {len(regions)} regions")
        n = len(s["positions"])
        for key in ("candidates", "confidences", "committed", "topk"):
            if len(s[key]) != n:
                _fail(f"{sp}.{key}", f"has {len(s[key])} entries but positions has {n}")
        for key in ("verdicts", "drafts"):
            if s.get(key) is not None and len(s[key]) != n:
                _fail(f"{sp}.{key}", f"has {len(s[key])} entries but positions has {n}")
        for i, v in enumerate(s.get("verdicts") or ()):
            if v not in range(len(VERDICTS)):
                _fail(f"{sp}.verdicts[{i}]", f"is {v}: must be one of 0..{len(VERDICTS) - 1} ({', '.join(VERDICTS)})")
            if bool(s["committed"][i]) != (v in COMMITTING):
                _fail(f"{sp}.committed[{i}]", f"is {s['committed'][i]} but the verdict is {VERDICTS[v]}")
        for i in range(n):
            if s["committed"][i] not in (0, 1):
                _fail(f"{sp}.committed[{i}]", "must be 0 or 1")
            for j, pair in enumerate(s["topk"][i]):
                if len(pair) != 2 or isinstance(pair[0], bool) or not isinstance(pair[0], int):
                    _fail(f"{sp}.topk[{i}][{j}]", "must be [id, probability]")


# ---- meaning: what a well-typed trace can still get wrong ----------------------------------------

BOX_SLACK = 0.05  # boxes may reach this share of the page's side past its edge (rounding, a straightened scan)


def _check_box(box: list[float] | None, page: "PageRecord", path: str) -> None:
    if box is None:
        return
    x0, y0, x1, y1 = box
    if x1 < x0 or y1 < y0:
        _fail(path, f"is {_fmt_box(box)}: its right or bottom edge comes before its left or top")
    sx, sy = BOX_SLACK * page.width, BOX_SLACK * page.height
    if x0 < -sx or y0 < -sy or x1 > page.width + sx or y1 > page.height + sy:
        _fail(path, f"is {_fmt_box(box)}, outside the {page.width:g}x{page.height:g} page")


def _fmt_box(box: list[float]) -> str:
    return "[" + ", ".join(f"{v:g}" for v in box) + "]"


def check_meaning(trace: "Trace", limits: Limits | None = None) -> None:
    """Refuse a trace whose parts contradict each other, in one line naming the first problem.

    The schema check (:func:`validate`) knows types and ranges; this knows what they mean: every box
    lies on the page, a diffusion step's positions lie in the block it names, no region holds more
    tokens than a decode may write (``max_new_tokens``), and the counts agree with each other
    (:func:`check_invariants`: each token committed once, at the forward it names; the NFE count).
    """
    limits = limits or current()
    for knob in ("block_length", "steps"):  # the block loop divides by both
        v = trace.params.get(knob)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
            _fail(f"params.{knob}", f"is {v!r}: must be a whole number of at least 1")
    if trace.text != joined_text(trace.regions)[0]:
        _fail("text", "is not the regions' texts joined by newlines (the layout pass left out)")
    page = trace.page
    for i, occ in enumerate(page.occluded):
        _check_box(occ.box, page, f"page.occluded[{i}].box")
    for ri, r in enumerate(trace.regions):
        _check_box(r.bbox, page, f"regions[{ri}].bbox")
        if len(r.tokens) > limits.max_new_tokens:
            _fail(f"regions[{ri}].tokens", f"has {len(r.tokens)} tokens, past the limit of {limits.max_new_tokens} "
                  "per region (MUDIFF_MAX_NEW_TOKENS)")
        for ti, t in enumerate(r.tokens):
            _check_box(t.box, page, f"regions[{ri}].tokens[{ti}].box")
    block_length = trace.params.get("block_length") if trace.decoder == "diffusion" else None
    for si, st in enumerate(trace.steps):
        for pos in st.positions:
            if not 0 <= pos < limits.max_new_tokens:
                _fail(f"steps[{si}].positions", f"holds {pos}: positions run from 0 to {limits.max_new_tokens - 1}")
        if st.drafts or st.verdicts:  # draft-and-verify: a position may be verified and drafted again, ahead of its block
            continue
        if len(set(st.positions)) != len(st.positions):
            _fail(f"steps[{si}].positions", "names a position twice")
        if isinstance(block_length, int) and block_length > 0:
            lo, hi = st.block * block_length, (st.block + 1) * block_length
            outside = [p for p in st.positions if not lo <= p < hi]
            if outside:
                _fail(f"steps[{si}].positions", f"holds {outside[0]}, outside block {st.block} "
                      f"(positions {lo} to {hi - 1} at block length {block_length})")
    problems = check_invariants(trace)
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise UserInputError(f"invalid trace: its counts disagree: {problems[0]}{more}")


# ---- version 1 -------------------------------------------------------------------------------------

_MASK_TEXT = re.compile(r"^<\|?\s*mask\s*\|?>$|^\[mask\]$|mask_token", re.IGNORECASE)
_V1_PAGE = ("width", "height", "source", "page_index", "page_count", "dpi", "sha256")


def upgrade_v1(d: dict) -> dict:
    """A version 1 trace as version 2: ``nfe`` -> ``forward``, ``commit_step`` -> ``commit_forward``;
    the mask id (not recorded then) is read off the vocabulary's display texts, and the prefill
    block is the one version 1 always used for MinerU-Diffusion (32). Anything malformed is left
    for :func:`validate` to name."""
    d = copy.deepcopy(d)
    d["schema_version"] = SCHEMA_VERSION
    for s in d.get("steps") or []:
        if isinstance(s, dict) and "nfe" in s:
            s["forward"] = s.pop("nfe")
    for r in d.get("regions") or []:
        for t in (r.get("tokens") or []) if isinstance(r, dict) else []:
            if isinstance(t, dict) and "commit_step" in t:
                t["commit_forward"] = t.pop("commit_step")
    params = d.get("params")
    model = d.get("model")
    vocab = d.get("vocab") if isinstance(d.get("vocab"), dict) else {}
    if isinstance(model, dict):
        masks = sorted(int(k) for k, v in vocab.items() if isinstance(v, str) and k.isdigit() and _MASK_TEXT.search(v.strip()))
        model.setdefault("mask_id", masks[0] if masks and d.get("decoder") != "ar" else None)
        if isinstance(params, dict):
            model.setdefault("exec_mode", params.pop("exec_mode", "eager"))
    if isinstance(params, dict) and d.get("decoder") == "diffusion" and isinstance(model, dict):
        params.setdefault("prefill_block", 32 if model.get("name") == "mineru-diffusion" else None)
    if isinstance(d.get("page"), dict):
        d["page"] = {k: v for k, v in d["page"].items() if k in _V1_PAGE or k == "exif_orientation"}
    return d


# ---- semantic checks -----------------------------------------------------------------------------


def joined_text(regions: list[RegionRecord]) -> tuple[str, str | None]:
    """The page's text (content regions joined by newlines) and its ground truth when every region has one."""
    content = [r for r in regions if r.kind != "layout"] or regions
    text = "\n".join(r.text for r in content)
    gt = "\n".join(r.gt_text for r in content) if content and all(r.gt_text is not None for r in content) else None
    return text, gt


def check_invariants(trace: Trace) -> list[str]:
    """Semantic checks beyond the schema; returns a list of violations (empty when consistent).

    Each region's tokens are committed exactly once, at the forward their record names; a forward
    (clock index) of a region belongs to one block; AR commits one token per step; the NFE count
    matches the recorded forwards plus block-commit passes; the metrics that the regions and steps
    determine agree with them (core/counts.py ``metric_problems``).
    """
    problems: list[str] = []
    recorded = bool(trace.params.get("record", True))
    commits: dict[tuple[int, int], int] = {}
    block_of: dict[tuple[int, int], int] = {}  # (region, forward) -> block: one clock index is one forward
    for si, s in enumerate(trace.steps):
        seen = block_of.setdefault((s.region, s.forward), s.block)
        if seen != s.block:
            problems.append(f"steps[{si}]: region {s.region} has forward {s.forward} in blocks {seen} and {s.block}")
        n_commit = sum(s.committed)
        if trace.is_autoregressive and n_commit != 1:
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
                elif trace.steps[si].forward != t.commit_forward:
                    problems.append(
                        f"region {ri} token {ti}: commit_forward {t.commit_forward} but committed at forward {trace.steps[si].forward}"
                    )
        if r.text != "".join(t.text for t in r.tokens if not t.stop):
            problems.append(f"region {ri}: text does not match its tokens")
    m = trace.metrics
    if recorded and m.nfe != len(trace.steps) + m.commit_passes:
        problems.append(f"metrics.nfe {m.nfe} != {len(trace.steps)} steps + {m.commit_passes} commit passes")
    return problems + metric_problems(trace)
