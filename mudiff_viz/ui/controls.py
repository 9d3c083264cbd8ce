"""The app's input controls, built once for every tab: the page picker, the decode knobs (generated
from :data:`mudiff_viz.decoding.settings.KNOBS`, so the app, the CLI and the trace agree on names,
defaults and ranges) and the Perturb panel (occlusion and degradation probes)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import gradio as gr

from mudiff_viz.core.limits import current as current_limits
from mudiff_viz.decoding.settings import KNOB, Knob
from mudiff_viz.ui import pagework
from mudiff_viz.ui.common import PAGE_TYPES, sample_paths


@dataclass
class PagePicker:
    """File, page number, preview and its info line: the same on every tab."""

    file: gr.File
    number: gr.Number
    preview: gr.Image
    info: gr.Markdown

    @property
    def outputs(self) -> list:
        return [self.preview, self.number, self.info]


def page_file(prefix: str, default: str | None, label: str = "Page (PDF, PNG or JPEG)") -> gr.File:
    return gr.File(label=label, value=default, file_types=PAGE_TYPES, elem_id=f"{prefix}-input", height=110)


def page_picker(prefix: str, default: str | None, label: str = "Page (PDF, PNG or JPEG)", samples: bool = True,
                preview_height: int = 380) -> PagePicker:
    """Upload + page number (+ bundled samples that only fill the file: the settings stay) in the
    current column, then the preview in the next one. Call inside a Row."""
    with gr.Column(scale=3, min_width=260):
        file = page_file(prefix, default, label)
        # no minimum or maximum on the component: Gradio would refuse 0 or a too-big number with its own
        # message ("Value 0 is less than minimum value 1"); the preview says which pages exist instead
        number = gr.Number(value=1, precision=0, label="PDF page", interactive=False, elem_id=f"{prefix}-page")
        if samples and sample_paths():
            gr.Examples(examples=[[p] for p in sample_paths()], inputs=[file], label="Bundled samples (click one; your settings stay)",
                        example_labels=[os.path.basename(p) for p in sample_paths()], examples_per_page=12)
    with gr.Column(scale=3, min_width=240):
        preview = gr.Image(label="The page that will be decoded", height=preview_height, interactive=False, buttons=[],
                           elem_id=f"{prefix}-preview", type="pil")
        info = gr.Markdown(elem_classes="mudiff-note", elem_id=f"{prefix}-page-info")
    return PagePicker(file, number, preview, info)


def preview_outputs(file, number, words_text=None, fraction=None, seed=0):
    """The picker's three outputs for the current choice (never an exception: the reason in words)."""
    p = pagework.preview(file, number, words_text, fraction, seed)
    label = f"PDF page (1 to {p.count})" if p.count > 1 else "PDF page"
    number_update = gr.update(value=p.number, label=label, interactive=p.count > 1 or not p.ok)
    return p.image, number_update, p.info


def knob_control(knob: Knob, hi: float | None = None, label: str | None = None, **kwargs) -> gr.components.Component:
    """One control for a decode knob: a dropdown for names, a slider for ranges, a number for seeds."""
    label = label or knob.label
    if knob.kind is str:
        return gr.Dropdown(list(knob.choices()), value=knob.default, label=label, info=knob.help, **kwargs)
    if knob.name == "seed":
        return gr.Number(value=knob.default, precision=0, minimum=0, label=label, info=knob.help, **kwargs)
    top = hi if hi is not None else (knob.ui_hi if knob.ui_hi is not None else knob.hi)
    return gr.Slider(knob.lo, top, value=knob.default, step=knob.step, label=label, info=knob.help, **kwargs)


@dataclass
class Knobs:
    """The decode knobs of one tab, by name (only those the tab shows); element ids ``PREFIX-NAME``."""

    prefix: str
    controls: dict = field(default_factory=dict)

    def add(self, name: str, **kwargs) -> gr.components.Component:
        self.controls[name] = knob_control(KNOB[name], elem_id=f"{self.prefix}-{name.replace('_', '-')}", **kwargs)
        return self.controls[name]

    def __getitem__(self, name: str):
        return self.controls[name]

    def values(self, names: tuple[str, ...]) -> list:
        return [self.controls[n] for n in names]


def diffusion_knobs(knobs: Knobs, suffix: str = "") -> gr.Group:
    """Block length, steps, threshold and strategy (what only the diffusion decoder reads)."""
    with gr.Group() as group:
        with gr.Row():
            knobs.add("block_length", label=KNOB["block_length"].label + suffix)
            knobs.add("steps", label="Steps per block (max)" + suffix)
        with gr.Row():
            knobs.add("threshold", label="Confidence threshold" + suffix)
            knobs.add("strategy", label="Remasking strategy" + suffix)
    return group


def max_tokens_control(knobs: Knobs) -> gr.Slider:
    limit = min(KNOB["max_new_tokens"].ui_hi, current_limits().max_new_tokens)
    return knobs.add("max_new_tokens", hi=limit, label="Max tokens per region", min_width=200)


def sampling_knobs(knobs: Knobs) -> None:
    """Temperature, seed, and (folded away) top-k / top-p."""
    with gr.Row():
        knobs.add("temperature", label="Temperature (0 = deterministic)")
        knobs.add("seed", min_width=110)
    with gr.Accordion("More sampling knobs (top-k, top-p)", open=False):
        with gr.Row():
            knobs.add("top_k")
            knobs.add("top_p")


PERTURB_HELP = ("Probes: change the page before decoding and see what each decoder leans on. **Occlusion** blanks "
                "words (a PDF's are redacted from the file) while the ground truth keeps them: click words on the "
                "preview, or occlude a random share. **Degradation** makes a worse scan. The player outlines "
                "occluded words.")


@dataclass
class PerturbPanel:
    words: gr.Textbox
    clear: gr.Button
    fraction: gr.Slider
    dpi: gr.Slider
    blur: gr.Slider
    noise: gr.Slider
    jpeg: gr.Slider
    rotate: gr.Slider
    seed: gr.Number

    @property
    def inputs(self) -> list:
        return [self.words, self.fraction, self.dpi, self.blur, self.noise, self.jpeg, self.rotate, self.seed]

    @property
    def preview_inputs(self) -> list:
        return [self.words, self.fraction, self.seed]


def perturb_panel(prefix: str, open_: bool = False) -> PerturbPanel:
    with gr.Accordion("Perturb the page (occlusion, degradation)", open=open_, elem_id=f"{prefix}-perturb"):
        gr.Markdown(PERTURB_HELP, elem_classes="mudiff-note")
        with gr.Row():
            words = gr.Textbox(value="", label="Occluded words (click them on the preview)", placeholder="e.g. 3, 17, 20",
                               elem_id=f"{prefix}-occlude-words", scale=3)
            clear = gr.Button("Clear", size="sm", scale=1, min_width=70, elem_id=f"{prefix}-occlude-clear")
        with gr.Row():
            fraction = gr.Slider(0.0, 0.5, value=0.0, step=0.05, label="…or occlude this share of words (seeded)",
                                 elem_id=f"{prefix}-occlude-fraction")
            seed = gr.Number(value=0, precision=0, minimum=0, label="Probe seed", min_width=110, elem_id=f"{prefix}-probe-seed")
        with gr.Row():
            dpi = gr.Slider(30, 150, value=150, step=5, label="Scan DPI (150 = as rendered)", elem_id=f"{prefix}-dpi")
            blur = gr.Slider(0.0, 3.0, value=0.0, step=0.25, label="Blur radius (px)", elem_id=f"{prefix}-blur")
        with gr.Row():
            noise = gr.Slider(0, 40, value=0, step=2, label="Noise (grey levels)", elem_id=f"{prefix}-noise")
            jpeg = gr.Slider(0, 95, value=0, step=5, label="JPEG quality (0 = off)", elem_id=f"{prefix}-jpeg")
            rotate = gr.Slider(-5.0, 5.0, value=0.0, step=0.25, label="Rotation (degrees)", elem_id=f"{prefix}-rotate")
    return PerturbPanel(words, clear, fraction, dpi, blur, noise, jpeg, rotate, seed)


def preview_event_kwargs(picker: PagePicker) -> dict:
    """How every event that redraws ``picker``'s preview is registered (the page load's first preview
    included): queued one at a time per picker, the last trigger winning, so responses land in order."""
    return {"queue": True, "concurrency_limit": 1, "concurrency_id": f"preview-{id(picker)}",
            "trigger_mode": "always_last", "show_progress": "hidden", "api_visibility": "private"}


def wire_picker(picker: PagePicker, perturb: PerturbPanel | None = None) -> None:
    """Every change of the file, the page number or the chosen words redraws the preview at once;
    clicking a word on the preview toggles it in the occlusion list; a new file or page clears it."""
    # Queued one at a time per picker, the last trigger winning: responses then arrive in order, so a
    # slow preview of an older choice (or of a cleared file) never lands on top of a newer one. The page
    # number listens to user input only: the file's own event sets it back to 1 and renders that page,
    # and a change event there would queue a second preview carrying the inputs of that moment.
    quiet = preview_event_kwargs(picker)
    if perturb is None:
        for event in (picker.file.change, picker.number.input):
            event(preview_outputs, [picker.file, picker.number], picker.outputs, **quiet)
        return
    fraction, seed = perturb.fraction, perturb.seed
    # a new file starts on page 1, a new page with no words chosen (word numbers belong to a page)
    picker.file.change(lambda f, fr, s: ("", *preview_outputs(f, 1, "", fr, s)), [picker.file, fraction, seed],
                       [perturb.words, *picker.outputs], **quiet)
    picker.number.input(lambda f, n, fr, s: ("", *preview_outputs(f, n, "", fr, s)), [picker.file, picker.number, fraction, seed],
                         [perturb.words, *picker.outputs], **quiet)
    for event in (perturb.words.change, perturb.fraction.release, perturb.seed.change):
        event(preview_outputs, [picker.file, picker.number, *perturb.preview_inputs], picker.outputs, **quiet)
    perturb.clear.click(lambda: "", None, perturb.words, queue=False, show_progress="hidden", api_visibility="private")

    def click(file, number, words, evt: gr.SelectData):
        try:
            x, y = evt.index
            return pagework.toggle_word(file, number, words, float(x), float(y))
        except Exception:  # a click on a page that failed to load: nothing to pick
            return gr.skip()

    picker.preview.select(click, [picker.file, picker.number, perturb.words], perturb.words, **quiet)
