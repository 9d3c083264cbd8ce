"""The Decode tab's first screen: a recorded decode that plays at once, with no model run.

It is the lessons' recording of the subword pair's self-speculative decode of the bundled sample
(assets/lessons/, written by scripts/record_lessons.py from the current models): a model that reads
(its CER is on screen), with drafts visibly accepted and rejected. Every figure in its line is read
from that recording. Without the recording (or the subword pair) the tab opens empty, as before.
"""

from __future__ import annotations

import functools

from mudiff_viz.core.metrics import first_step_share
from mudiff_viz.core.trace import REJECTED, Trace
from mudiff_viz.ui import howitworks, lesson_recordings
from mudiff_viz.views.labels import decoder_label
from mudiff_viz.views.page_image import image_data_url
from mudiff_viz.views.player import player_payload

RUN = howitworks.Run(howitworks.SUBWORD, {}, decoder="self-speculative", label="subword pair · self-speculative",
                     reads=True)
MAX_CER = 0.03  # the showcase must read: tests/test_hero.py holds the shipped recording to this
MAX_FIRST_STEP = 0.6  # ... and show decoding order (or rejected drafts), not one-step blocks


def rejected_drafts(trace: Trace) -> int:
    return sum(v == REJECTED for s in trace.steps for v in (s.verdicts or ()))


def shows_diffusion_at_work(trace: Trace) -> bool:
    """At most 60% of tokens committed at their block's first step, or drafts visibly rejected; CER <= 3%."""
    cer = trace.metrics.cer
    if cer is None or cer > MAX_CER:
        return False
    share = first_step_share(trace)
    return rejected_drafts(trace) > 0 or (share is not None and share <= MAX_FIRST_STEP)


@functools.lru_cache(maxsize=1)
def hero_trace() -> Trace | None:
    trace = lesson_recordings.load_recording(RUN)
    return trace if trace is not None and shows_diffusion_at_work(trace) else None


def hero_line(trace: Trace) -> str:
    """What the visitor is watching, in one plain line: model, decoder, and what the colours mean."""
    m = trace.metrics
    drafts = trace.params.get("draft_length")
    how = (f"it drafts {drafts} tokens ahead in parallel (diffusion) and checks them with its own one-token reads"
           if trace.is_speculative and drafts else "it unmasks many positions per forward pass")
    return (f"▶ **Watching a recorded decode:** a {trace.model.params_m:.1f}M-parameter diffusion OCR model "
            f"(the subword pair, {decoder_label(trace.decoder)} decoder) reads this page: {how}. "
            f"Coloured = committed (yellow: confident), faded = its current guess, struck through = a rejected draft. "
            f"{m.tokens} tokens in {trace.clock_length} forward passes, CER {100 * m.cer:.1f}%. "
            "**Run it on your page:** drop a page on the left, then press **Run decode**.")


@functools.lru_cache(maxsize=1)
def hero_payload() -> dict | None:
    """The player's first value: the recording, playing from the start at once (payload ``autoplay``)."""
    trace = hero_trace()
    if trace is None:
        return None
    payload = player_payload(trace, image_url=image_data_url(lesson_recordings.lesson_page().image),
                             label=f"recorded: {RUN.label}")
    payload["autoplay"] = True
    return payload
