"""One page, original and word-shuffled, through both decoders: the data behind the app's Shuffle tab.

Semantic Shuffle here is *our reconstruction* of the paper's unpublished benchmark (see
docs/semantic-shuffle.md). The "original" column is the page re-rendered at level 0 through the same
redact-and-write path as the shuffled one (the benchmark's control), so the only thing that differs
between the two columns is word order. Scores use :func:`mudiff_viz.probes.bench.score_row`, so the
numbers here and in the benchmark mean the same thing.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Callable

from mudiff_viz.core.errors import UserInputError
from mudiff_viz.core.limits import Limits, current
from mudiff_viz.core.metrics import cer
from mudiff_viz.core.trace import Trace
from mudiff_viz.decoding.pipeline import decode_page
from mudiff_viz.probes.apply import ProbeSpec, probed_page
from mudiff_viz.probes.bench import score_row
from mudiff_viz.probes.shuffle import ShuffledPage, check_level, shuffle_page

COLUMNS = ("original", "shuffled")
DECODERS = ("diffusion", "ar")
# grid order, row by row: diffusion on top, AR below; original left, shuffled right
GRID = tuple((decoder, column) for decoder in DECODERS for column in COLUMNS)

Key = tuple[str, str]  # (decoder, column)
Progress = Callable[[int, int, str], None]


@dataclass
class ShufflePages:
    """The two pages of one probe: the level-0 control ("original") and the probed page (the
    "shuffled" column: word-shuffled, or occluded, or degraded; ``probe`` says which)."""

    level: float
    seed: int
    original: ShuffledPage
    shuffled: ShuffledPage
    probe: str = "shuffle"  # "shuffle" | "occlude" | "degrade"
    description: str = ""  # what the probe did, in words (occlusion and degradation)

    def page(self, column: str) -> ShuffledPage:
        return self.original if column == "original" else self.shuffled

    @property
    def lines_changed(self) -> int:
        return sum(1 for ln in self.shuffled.result.lines if ln.changed) if self.shuffled.result else 0

    @property
    def lines_total(self) -> int:
        return len(self.shuffled.result.lines) if self.shuffled.result else 0


def shuffle_pages(
    data: bytes,
    level: float,
    seed: int,
    page_index: int = 0,
    gt_text: str | None = None,
    trusted: bool = False,
    limits: Limits | None = None,
    name: str = "page",
) -> ShufflePages:
    """Both pages of one shuffle (PDF bytes, or image bytes with ``gt_text`` from a sidecar).

    ``name`` (the input's file name) names both pages' ``source``, so traces and the player say
    which page they show: "NAME (level 0)" and "NAME (shuffled: level L, seed S)".
    """
    level = check_level(level)
    limits = limits or current()
    common = dict(page_index=page_index, gt_text=gt_text, trusted=trusted, rerender=True, limits=limits)
    original = _named(shuffle_page(data, 0.0, seed, **common), f"{name} (level 0)")
    shuffled = original
    if level != 0:
        shuffled = _named(shuffle_page(data, level, seed, **common), f"{name} (shuffled: level {level:g}, seed {seed})")
    return ShufflePages(level=level, seed=int(seed), original=original, shuffled=shuffled)


def probe_pages(
    data: bytes,
    spec: ProbeSpec,
    page_index: int = 0,
    gt_text: str | None = None,
    trusted: bool = False,
    limits: Limits | None = None,
    name: str = "page",
) -> ShufflePages:
    """The level-0 control and the same page occluded or degraded (``spec``), for the 2x2 grid.

    Both columns keep the original's ground truth: an occluded word still counts when it is not
    read back, and a degraded page says the same words.
    """
    if not spec.active:
        raise UserInputError("choose what the probe changes: words to occlude, or a degradation knob")
    limits = limits or current()
    original = _named(shuffle_page(data, 0.0, spec.seed, page_index=page_index, gt_text=gt_text, trusted=trusted,
                                   rerender=True, limits=limits), f"{name} (level 0)")
    probe = "occlude" if spec.occludes else "degrade"
    page = probed_page(data, page_index, float(original.page.dpi or 150), spec, limits, base=original.page)
    probed = ShuffledPage(page=dataclasses.replace(page, source=f"{name} ({spec.describe()})"), gt_text=original.gt_text,
                          result=None)
    return ShufflePages(level=0.0, seed=spec.seed, original=original, shuffled=probed, probe=probe,
                        description=spec.describe())


def _named(sp: ShuffledPage, source: str) -> ShuffledPage:
    return dataclasses.replace(sp, page=dataclasses.replace(sp.page, source=source))


def with_line_truth(trace: Trace, gt_text: str | None) -> Trace:
    """The trace with per-line ground truth attached when it had none (image pages: the sidecar's
    lines, matched one to one when the counts agree), so the player can mark wrong tokens."""
    if gt_text is None or trace.gt_text is not None:
        return trace
    lines = [" ".join(ln.split()) for ln in gt_text.splitlines() if ln.strip()]
    if len(lines) != len(trace.regions):
        return trace
    regions = [dataclasses.replace(r, gt_text=gt) for r, gt in zip(trace.regions, lines)]
    metrics = dataclasses.replace(trace.metrics, cer=round(cer(trace.text, "\n".join(lines)), 5))
    return dataclasses.replace(trace, regions=regions, gt_text="\n".join(lines), metrics=metrics)


def decode_grid(
    pages: ShufflePages,
    specs: dict[str, str],
    params: dict[str, object],
    progress: Progress | None = None,
    finished: Callable[[Key, Trace], None] | None = None,
    decode: Callable[..., Trace] | None = None,
) -> dict[Key, Trace]:
    """Decode both pages with both decoders (four traces, in GRID order).

    ``params`` maps decoder -> decoder parameters (``pipeline.make_params``); ``progress(done, total,
    what)`` reports each decode's own progress, ``what`` naming the decoder and page; ``finished(key,
    trace)`` hears of each trace as it is done (so a viewer can show it before the other three).
    ``decode``: ``decode_page`` (None) or a stand-in with its arguments (the app's ZeroGPU calls).
    """

    out: dict[Key, Trace] = {}
    for decoder, column in GRID:
        sp = pages.page(column)
        if column == "shuffled" and pages.shuffled is pages.original:  # level 0: the same page
            out[(decoder, column)] = out[(decoder, "original")]
            if finished:
                finished((decoder, column), out[(decoder, column)])
            continue
        what = f"{'AR' if decoder == 'ar' else 'diffusion'} on the {column} page"
        cb = (lambda d, t, w=what: progress(d, t, w)) if progress else None
        trace = (decode or decode_page)(sp.page, model=specs[decoder], decoder=decoder, params=params[decoder], progress=cb)
        out[(decoder, column)] = with_line_truth(trace, sp.gt_text)
        if finished:
            finished((decoder, column), out[(decoder, column)])
    return out


def score_grid(traces: dict[Key, Trace], pages: ShufflePages) -> dict[Key, dict | None]:
    """Per pane: CER, error tokens and confidently-wrong tokens against that page's ground truth
    (None where the ground truth is unknown, e.g. an uploaded image without a sidecar)."""
    out: dict[Key, dict | None] = {}
    for (decoder, column), trace in traces.items():
        gt = pages.page(column).gt_text
        out[(decoder, column)] = score_row(trace, gt) if gt is not None else None
    return out


def further_seed_changes(
    more: list[tuple[int, ShufflePages]],
    control: dict[Key, dict | None],
    specs: dict[str, str],
    params: dict[str, object],
    progress: Progress | None = None,
    decode=None,
) -> dict[str, dict[int, float]]:
    """The CER change (probed minus original) under each further seed: only the probed page is
    decoded, the control is the grid's (its page does not depend on the seed). Together with the
    grid's own seed, these changes are the seed spread a single change is judged against. ``decode``:
    ``decode_page`` or a stand-in with its arguments (the app's ZeroGPU calls, one per decode)."""
    out: dict[str, dict[int, float]] = {d: {} for d in DECODERS}
    total = len(more) * len(DECODERS)
    for i, (seed, pages) in enumerate(more):
        sp = pages.shuffled
        for j, decoder in enumerate(DECODERS):
            base = control.get((decoder, "original"))
            if base is None or sp.gt_text is None:
                continue
            what = f"{'AR' if decoder == 'ar' else 'diffusion'} on the page of seed {seed}"
            trace = (decode or decode_page)(sp.page, model=specs[decoder], decoder=decoder, params=params[decoder])
            out[decoder][seed] = score_row(with_line_truth(trace, sp.gt_text), sp.gt_text)["cer"] - base["cer"]
            if progress:
                progress(i * len(DECODERS) + j + 1, total, what)
    return out
