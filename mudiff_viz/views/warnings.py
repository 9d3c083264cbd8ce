"""When a decode's result should not be trusted: the page looks unlike what the model was trained on.

A photo-like page (noise, rotation, handwriting, a font far from the training fonts) still "decodes":
the model writes something. These checks read only the trace and say, in a sentence each, why a
result is probably nonsense, so the app can show it next to the result instead of presenting
garbage as text.
"""

from __future__ import annotations

from mudiff_viz.core.align import alignable, alignment_note
from mudiff_viz.core.trace import Trace
from mudiff_viz.views.labels import counted

LOW_MEAN_CONFIDENCE = 0.75  # the shipped pair's clean pages sit well above 0.9
LOW_TOKEN_SHARE = 0.3  # share of tokens under 0.5 confidence
FEW_CHARS_PER_REGION = 4  # regions that found almost nothing


def decode_warnings(trace: Trace, clean_page: bool = False) -> list[str]:
    """Sentences saying why this result looks out of range (empty: nothing suspicious).

    ``clean_page``: the page is known to be clean (a bundled sample, no probes), so a bad reading is
    the model's or its settings', never the page's: the sentence says so instead of suspecting a photo."""
    out: list[str] = []
    tokens = [t for r in trace.regions for t in r.tokens if not t.stop]
    if not trace.regions or not trace.text.strip():
        return ["No text was found on this page: it may be blank, an image without printed text, or too faint."]
    if tokens:
        mean = sum(t.confidence for t in tokens) / len(tokens)
        low = sum(t.confidence < 0.5 for t in tokens) / len(tokens)
        if mean < LOW_MEAN_CONFIDENCE:
            why = ("This is a clean bundled page, so the model or its settings are to blame (an untrained model, a low "
                   "threshold, a quota that forces commits)." if clean_page else
                   "The page may be a photo, rotated, noisy, handwritten or in a font unlike the model's.")
            out.append(f"The model was unsure of most of this page (mean confidence {mean:.2f}): the text is probably "
                       f"wrong. {why}")
        elif low > LOW_TOKEN_SHARE:
            out.append(f"{100 * low:.0f}% of the tokens were committed with less than 0.5 confidence: read the result "
                       "with care.")
    page_area = max(1.0, trace.page.width * trace.page.height)
    regions = [r for r in trace.regions if r.kind != "layout"]
    if regions and len(regions) <= 3 and not clean_page:
        big = [r for r in regions if (r.bbox[2] - r.bbox[0]) * (r.bbox[3] - r.bbox[1]) > 0.25 * page_area]
        short = [r for r in regions if len(r.text.strip()) < FEW_CHARS_PER_REGION]
        if big and trace.model.name.startswith("nano"):
            out.append(f"Only {counted(len(regions), 'text region')} {'was' if len(regions) == 1 else 'were'} found, covering large parts of the page: the line "
                       "finder did not see printed text lines (a photo, a rotated scan, or a picture).")
        elif len(short) == len(regions):
            out.append("The regions found hold almost no text: this does not look like a page of printed text.")
    return out


def alignment_notes(trace: Trace) -> list[str]:
    """One sentence per region whose ground truth is too long to align: its tokens are shown
    uncoloured (neither right nor wrong), which the view must say."""
    return [alignment_note(i, r.text, r.gt_text) for i, r in enumerate(trace.regions)
            if r.gt_text is not None and not alignable(r.text, r.gt_text)]
