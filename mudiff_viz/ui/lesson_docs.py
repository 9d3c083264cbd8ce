"""The lesson figures README.md and docs/app.md quote, written from the shipped recordings.

Each block sits between marker comments (``<!-- lesson-table -->`` ... ``<!-- /lesson-table -->``);
``python scripts/readme_figures.py`` rewrites them from assets/lessons/ and ``--check`` fails when
one differs, as ``tests/test_readme_figures.py`` does, so the docs cannot drift from the app.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from mudiff_viz.core.trace import Trace
from mudiff_viz.ui import howitworks, lesson_recordings
from mudiff_viz.ui.lessons_tab import BAD_CER
from mudiff_viz.views.lesson_figures import RunFigures, render, run_figures

ROOT = Path(__file__).resolve().parents[2]

README_LESSONS = (
    "Each lesson opens at once on a run recorded with the shipped models (`assets/lessons/`).\n"
    "**Lesson 7** puts both embedded pairs on one clock. The character pair's diffusion decoder commits "
    "{pairs[0].first_step_share:.0%} of its\ntokens at their block's first pass. The subword pair reads with its "
    "self-speculative decoder.\nIt drafts up to "
    "{pairs[1].draft_length} tokens and verifies them itself: {pairs[1].tokens_per_forward:.2f} tokens per forward, {pairs[1].cer:.1f}% CER on this page.\n"
    "**Lesson 8** runs the subword pair's AR twin ({drafts[0].forwards} passes), speculative ({drafts[1].forwards}) "
    "and self-speculative\n({drafts[2].forwards}) decoders on one clock. Each lesson's pair, decoder and CER: "
    "[docs/app.md](docs/app.md)."
)

APP_DRAFTS = (
    "Lesson 8's draft counts, as the line above its player gives them. Both decoders draft\n"
    "{drafts[1].draft_length} tokens, the subword pair's own length, above the draft floor.\n"
    "Speculative: {drafts[1].drafted} drafts, {drafts[1].accepted} accepted, {drafts[1].rejected} rejected "
    "(the AR twin's token instead), {drafts[1].discarded} discarded\nafter a rejection; "
    "{drafts[1].tokens_per_verify:.2f} tokens per verify forward.\n"
    "Self-speculative: {drafts[2].drafted} drafts, {drafts[2].accepted} accepted, {drafts[2].rejected} rejected, "
    "{drafts[2].discarded} discarded.\nIts speculative pane's tokens equal the AR pane's exactly (a test)."
)


def lesson_traces() -> dict[str, list[Trace]]:
    """Every lesson's shipped recordings, by lesson key (one per pane)."""
    out = {}
    for lesson in howitworks.LESSONS:
        traces = [lesson_recordings.load_recording(r) for r in lesson.runs]
        if any(t is None for t in traces):
            raise FileNotFoundError(f"lesson {lesson.key} has no recording: run python scripts/record_lessons.py")
        out[lesson.key] = traces
    return out


def _fmt(v: float | None, pct: bool = False) -> str:
    if v is None:
        return "–"
    return f"{v:.1f}%" if pct else f"{v:.2f}"


def table(traces: dict[str, list[Trace]]) -> str:
    """One markdown row per lesson pane: what it ran and the figures its recording holds."""
    rows = ["| lesson | pane | pair | decoder | strategy | settings | forward passes | tokens / forward | "
            "first-step commits | steps / block | order vs position | CER |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for lesson in howitworks.LESSONS:
        for i, (run, trace) in enumerate(zip(lesson.runs, traces[lesson.key])):
            f = run_figures(trace)
            diffusion = f.decoder == "diffusion"
            changed = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in run.settings.items() if k != "strategy")
            if diffusion:
                settings = changed or "defaults"
            else:
                settings = f"draft {f.draft_length}, {f.floor_said}" if f.draft_length else "–"
            cer = _fmt(f.cer, pct=True)
            if lesson.cost and f.cer is not None and f.cer > 100 * BAD_CER:
                cer = f"**{cer}** (the lesson's point)"
            rows.append(
                f"| {lesson.title if i == 0 else ''} | {howitworks.run_label(run)} | {f.pair} | {f.decoder} | "
                f"{f.strategy if diffusion else '–'} | {settings} | {f.forwards} | {_fmt(f.tokens_per_forward)} | "
                f"{_fmt(None if f.first_step_share is None else 100 * f.first_step_share, pct=True)} | "
                f"{_fmt(f.steps_per_block)} | {_fmt(f.order)} | {cer} |")
    return "\n".join(rows)


def _figures(traces: dict[str, list[Trace]]) -> dict[str, list[RunFigures]]:
    return {key: [run_figures(t) for t in ts] for key, ts in traces.items()}


def readme_lessons(traces: dict[str, list[Trace]]) -> str:
    return render(README_LESSONS, [], **_figures(traces))


def app_drafts(traces: dict[str, list[Trace]]) -> str:
    return render(APP_DRAFTS, [], **_figures(traces))


BLOCKS: dict[str, dict[str, Callable[[dict[str, list[Trace]]], str]]] = {
    "README.md": {"lesson-figures": readme_lessons},
    "docs/app.md": {"lesson-table": table, "lesson-drafts": app_drafts},
}


def marker(name: str) -> tuple[str, str]:
    return (f"<!-- {name}: written by python scripts/readme_figures.py from assets/lessons/ -->",
            f"<!-- /{name} -->")


def fill(doc: str, blocks: dict[str, str]) -> str:
    """``doc`` with each named block between its markers replaced; a missing marker is an error."""
    for name, text in blocks.items():
        start, end = marker(name)
        pattern = re.compile(re.escape(start) + r"\n.*?\n" + re.escape(end), re.S)
        if not pattern.search(doc):
            raise ValueError(f"no {start} ... {end} block")
        doc = pattern.sub(lambda _: f"{start}\n{text}\n{end}", doc, count=1)
    return doc


def stale(root: Path = ROOT, write: bool = False) -> list[str]:
    """The files whose blocks differ from the recordings (rewritten when ``write``)."""
    traces = lesson_traces()
    out = []
    for rel, makers in BLOCKS.items():
        path = root / rel
        doc = path.read_text(encoding="utf-8")
        new = fill(doc, {name: make(traces) for name, make in makers.items()})
        if new != doc:
            out.append(rel)
            if write:
                path.write_text(new, encoding="utf-8")
    return out
