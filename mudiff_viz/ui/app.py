"""The Gradio app: Decode, Compare (AR vs diffusion), Probes (Semantic Shuffle, occlusion,
degradation), Trace viewer, Corpus, How it works.

Layout only: each tab's controls and callbacks live in its own module (``*_tab.py``), shared
controls in :mod:`mudiff_viz.ui.controls`, what results put on screen in :mod:`mudiff_viz.ui.results`.
Stable element ids for tests and automation: ``decode-input``, ``decode-page``, ``decode-preview``,
``decode-run``, ``player``, ``compare-run``, ``compare-player``, ``shuffle-input``, ``shuffle-level``,
``shuffle-seed``, ``shuffle-run``, ``shuffle-player``, ``shuffle-scores``, ``shuffle-bench-run``,
``shuffle-bench-figure``, ``trace-upload``, ``viewer-player``, ``corpus-path``, ``corpus-player``.
"""

from __future__ import annotations

import os

import gradio as gr

from mudiff_viz.core.limits import current as current_limits
from mudiff_viz.ui import compare_tab, controls, corpus_tab, decode_tab, lessons_tab, models, opening, shuffle_tab, viewer_tab
from mudiff_viz.ui import gpu as _gpu  # noqa: F401  (imports `spaces` before anything touches CUDA)
from mudiff_viz.ui.common import default_sample
from mudiff_viz.ui.inputs_guard import guard_inputs
from mudiff_viz.ui.results import SAYS_WHY

INTRO = """
# mudiff-viz · watch diffusion OCR decode, step by step
A diffusion OCR model fills a page's text in **parallel**, unmasking what it is surest of first. Every forward
pass, guess and confidence is recorded and replayed here: play, scrub and hover.
"""

CSS = """
.gradio-container { max-width: 1560px !important; }
/* clip, not hidden: a hidden overflow makes the container a scroll box, and the player's sticky
   controls (phones) would stick to it instead of to the screen */
.gradio-container { overflow: clip !important; }
/* phones: a smaller title, so the Run button is on the first screen with room to spare */
@media (max-width: 640px) { .gradio-container h1 { font-size: 1.6em !important; } }
#decode-run, #compare-run, #shuffle-run { min-height: 46px; font-size: 16px; }
.mudiff-note { font-size: 13px; opacity: .85; }
.mudiff-warning { border-left: 4px solid #d55e00; background: rgba(213, 94, 0, .08); padding: 6px 12px; border-radius: 4px; }
/* slider number boxes wide enough for 4096 */
.gradio-container input[type="number"] { min-width: 5.2em; }
/* the drop zone under the page's file box: it looks like a target even when the sample fills the box */
.mudiff-drop { border: 2px dashed var(--border-color-accent, #7aa6d8) !important; border-radius: 8px; }
/* phones: the player (the first screen's showcase, then each result) comes right under Run, before the page */
@media (max-width: 640px) {
  #decode-main { flex-direction: column !important; } #decode-player-column { order: -1; }
  #decode-decoder label { padding: 4px 8px !important; }
  #decode-setups button { min-width: 0 !important; flex: 1 1 28% !important; font-size: 12px; padding: 4px !important; }
}
#decode-setups { align-items: center; gap: 8px; }
/* a folded group of knobs reads as one clickable line: its name on the left, the arrow on the right */
.mudiff-more-knobs > .label-wrap, #decode-advanced > .label-wrap { justify-content: space-between !important; text-align: left !important; font-weight: 600; }
#decode-setups > .prose, #decode-setups .mudiff-note { flex: 0 0 auto !important; }
"""
# a failed run (results.shows_failure) ends with its reason in the status line and the player; Gradio's
# bare "Error" pill on its outputs (results.says_why) would only cover it
CSS += f'.{SAYS_WHY} [data-testid="status-tracker"]:has(> .error) {{ display: none !important; }}\n'


def build_app() -> gr.Blocks:
    if _gpu.preload_wanted():  # on a Space: the models exist before the first GPU call (ui/gpu.py)
        _gpu.preload_models()
    default = default_sample()
    model_choices = models.picker_choices()
    # delete_cache: Gradio's copies of uploads and downloads older than an hour go, checked every 30 minutes
    with gr.Blocks(title="mudiff-viz: diffusion OCR, step by step", delete_cache=(1800, 3600)) as demo:
        gr.Markdown(INTRO)
        preload = _gpu.preload_note()  # a model that failed to load at start: said here, not first in a GPU call
        gr.Markdown(preload, visible=bool(preload), elem_id="preload-status", elem_classes=["mudiff-warning"])
        # "wrap": on a phone every tab stays in sight on a second row (the menu hid four behind "...")
        with gr.Tabs(selected="decode", overflow_behavior="wrap") as tabs:
            with gr.Tab("Decode", id="decode"):
                decode = decode_tab.build(default, model_choices)
            with gr.Tab("Compare AR vs diffusion", id="compare"):
                compare = compare_tab.build(default, model_choices)
            with gr.Tab("Semantic Shuffle and probes", id="shuffle"):
                shuffle = shuffle_tab.build(default, model_choices)
            with gr.Tab("Trace viewer", id="viewer"):
                viewer = viewer_tab.build()
            with gr.Tab("Corpus", id="corpus") as corpus_tab_item:
                corpus_tab.build(corpus_tab_item)
            with gr.Tab("How it works", id="how") as how_tab:
                lessons = lessons_tab.build(how_tab)
        # each picker's first preview joins that picker's queue of preview events, so an upload made
        # before it finishes is drawn after it (the bundled sample renders in-process and is cached)
        for picker in (decode.picker, compare["picker"], shuffle["picker"]):
            demo.load(controls.preview_outputs, [picker.file, picker.number], picker.outputs,
                      **controls.preview_event_kwargs(picker))
        opening.wire(demo, tabs, lessons, viewer)  # ?lesson=masks&frame=12 opens that lesson at that frame
    return guard_inputs(demo)  # every API input checked before Gradio's preprocessing (ui/inputs_guard.py)


def configure_queue(demo: gr.Blocks) -> gr.Blocks:
    """The app's queue: events not given a concurrency id of their own run one at a time per event;
    decodes share the model queue (capacity.DECODE_SLOTS at once) and model-free work its own
    (capacity.LIGHT_WORK). Waiting visitors see their place in the queue and the expected wait."""
    return demo.queue(default_concurrency_limit=1)


def theme() -> gr.themes.Base:
    """Gradio's default look on the system's own fonts: its bundled Source Sans Pro has a regular and a
    semibold face only, so bold text was drawn half in a substitute font ("ʙlocks"); nothing is fetched."""
    return gr.themes.Default(font=["system-ui", "-apple-system", "Segoe UI", "Roboto", "DejaVu Sans", "sans-serif"],
                             font_mono=["ui-monospace", "SFMono-Regular", "Menlo", "Consolas", "DejaVu Sans Mono",
                                        "monospace"])


def launch_kwargs() -> dict:
    """Keyword arguments for ``demo.launch``. Host and port come from MUDIFF_HOST / MUDIFF_PORT when
    set; otherwise Gradio's own defaults apply (127.0.0.1:7860, or GRADIO_SERVER_NAME / _PORT, which
    Hugging Face Spaces sets to listen on 0.0.0.0)."""
    kwargs = {
        "run_history": False,  # player payloads are large; nothing to keep in the browser
        "max_file_size": current_limits().max_upload_bytes,  # Gradio refuses bigger uploads before any callback
        "css": CSS,
        "theme": theme(),
        "footer_links": ["api", "gradio"],
        "allowed_paths": corpus_tab.allowed_paths(),
    }
    if os.environ.get("MUDIFF_HOST"):
        kwargs["server_name"] = os.environ["MUDIFF_HOST"]
    if os.environ.get("MUDIFF_PORT"):
        kwargs["server_port"] = int(os.environ["MUDIFF_PORT"])
    return kwargs
