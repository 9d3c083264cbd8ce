"""The app's input controls, built once for every tab: the page picker, the decode knobs (generated
from :data:`mudiff_viz.decoding.settings.KNOBS`, so the app, the CLI and the trace agree on names,
defaults and ranges) and the Perturb panel (occlusion and degradation probes)."""

from __future__ import annotations

import functools
import inspect
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import gradio as gr

from models import registry
from mudiff_viz.core.errors import ModelLoadError
from mudiff_viz.core.limits import current as current_limits
from mudiff_viz.decoding.settings import DIFFUSION, KNOB, KNOBS, MODES, TASKS, Knob, preset_knobs
from mudiff_viz.ui import models, pagework
from mudiff_viz.ui.common import PAGE_TYPES, sample_paths


@dataclass
class PagePicker:
    """File, page number, preview and its info line: the same on every tab."""

    file: gr.File
    number: gr.Number
    preview: gr.Image
    info: gr.Markdown
    drop: gr.File | None = None  # an always-empty drop zone: the file box above shows the sample, not a target

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
        # the label as a line above the zone: Gradio's label box sat on top of the zone's upload icon
        gr.Markdown("**Your own page** (PDF, PNG, JPEG): drop it below or click to choose", elem_classes="mudiff-note",
                    elem_id=f"{prefix}-drop-label")
        drop = gr.File(label="Your own page (PDF, PNG, JPEG)", show_label=False, file_types=PAGE_TYPES,
                       elem_id=f"{prefix}-drop", height=120, elem_classes="mudiff-drop")
        # no minimum or maximum on the component: Gradio would refuse 0 or a too-big number with its own
        # message ("Value 0 is less than minimum value 1"); the preview says which pages exist instead
        number = gr.Number(value=1, precision=0, label="PDF page", interactive=False, elem_id=f"{prefix}-page")
        if samples and sample_paths():
            gr.Examples(examples=[[p] for p in sample_paths()], inputs=[file], label="Bundled samples (click one; your settings stay)",
                        example_labels=[os.path.basename(p) for p in sample_paths()], examples_per_page=12)
    with gr.Column(scale=3, min_width=240):
        preview = gr.Image(label="The page that will be decoded (click a word to occlude it)", height=preview_height, interactive=False, buttons=[],
                           elem_id=f"{prefix}-preview", type="pil")
        info = gr.Markdown(elem_classes="mudiff-note", elem_id=f"{prefix}-page-info")
    return PagePicker(file, number, preview, info, drop)


def preview_outputs(file, number, words_text=None, fraction=None, seed=0):
    """The picker's three outputs for the current choice (never an exception: the reason in words)."""
    p = pagework.preview(file, number, words_text, fraction, seed)
    label = f"PDF page (1 to {p.count})" if p.count > 1 else "PDF page"
    number_update = gr.update(value=p.number, label=label, interactive=p.count > 1 or not p.ok)
    return p.image, number_update, p.info


# The app's wording for some knobs (the CLI and the error messages use ``Knob.label``).
UI_LABELS = {"steps": "Steps per block (max)", "threshold": "Confidence threshold", "strategy": "Remasking strategy",
             "temperature": "Temperature (0 = deterministic)", "max_new_tokens": "Max tokens per region"}


def knob_names() -> tuple[str, ...]:
    """Every decode knob, in :data:`KNOBS` order: the order a tab showing them all passes their values."""
    return tuple(k.name for k in KNOBS)


def knob_values(names: Sequence[str], values: Sequence) -> dict:
    """Controls' values as ``make_params`` keywords, by knob name. Numbers are cast to the knob's
    type when that loses nothing and an emptied field is the knob's default; everything else is
    checked by ``make_params``, with the CLI's one-line messages."""
    out = {}
    for name, value in zip(names, values):
        knob = KNOB[name]
        if knob.kind is bool and isinstance(value, str) and value in BOOL_CHOICES.values():
            value = {"auto": None, "on": True, "off": False}[value]
        elif value is None or value == "":
            value = knob.default
        elif knob.kind is int and isinstance(value, float) and value.is_integer():
            value = int(value)
        elif knob.kind is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        out[name] = value
    return out


def with_knobs(handler, lead: int, names: Sequence[str]):
    """``handler(*lead_args, knobs: dict, *rest)`` as Gradio sees it: one parameter per knob in
    ``names`` (the API names them as the knobs are named everywhere), so a tab's inputs are its knob
    controls in that order and no handler lists knobs by hand. Generators stay generators (streaming)."""
    sig = inspect.signature(handler)
    params = list(sig.parameters.values())
    head, rest = params[:lead], params[lead + 1 :]
    knob_params = [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=KNOB[n].default) for n in names]
    shown = sig.replace(parameters=[p.replace(kind=inspect.Parameter.POSITIONAL_OR_KEYWORD) for p in head + knob_params + rest])

    def split(args, kwargs):
        bound = shown.bind(*args, **kwargs)
        bound.apply_defaults()
        got = bound.arguments
        knobs = knob_values(names, [got[n] for n in names])
        return [got[p.name] for p in head], knobs, {p.name: got[p.name] for p in rest}

    if inspect.isgeneratorfunction(handler):
        @functools.wraps(handler)
        def gen_wrapper(*args, **kwargs):
            lead_args, knobs, rest_kwargs = split(args, kwargs)
            yield from handler(*lead_args, knobs, **rest_kwargs)

        wrapper = gen_wrapper
    else:
        @functools.wraps(handler)
        def wrapper(*args, **kwargs):
            lead_args, knobs, rest_kwargs = split(args, kwargs)
            return handler(*lead_args, knobs, **rest_kwargs)

    del wrapper.__wrapped__  # Gradio must see the knob parameters, not the handler's own
    wrapper.__signature__ = shown
    return wrapper


BOOL_CHOICES = {"the model's own": "auto", "on": "on", "off": "off"}  # a bool knob's control (None: the model's own)


def control_value(knob: Knob, value):
    """A knob's value as its control holds it (a bool knob's dropdown holds auto, on or off)."""
    if knob.kind is bool:
        return "auto" if value is None else ("on" if value else "off")
    return value


def knob_control(knob: Knob, hi: float | None = None, label: str | None = None, **kwargs) -> gr.components.Component:
    """One control for a decode knob: a dropdown for names (a text box when any name goes) and for
    on/off (with the model's own choice), a slider for ranges, a number for seeds (and for ranges too
    wide for a slider)."""
    label = label or UI_LABELS.get(knob.name, knob.label)
    if knob.kind is bool:
        return gr.Dropdown(list(BOOL_CHOICES.items()), value=control_value(knob, knob.default), label=label,
                           info=knob.help, **kwargs)
    if knob.kind is str and knob.choices is None:  # a free name (the verifier's model spec)
        return gr.Textbox(value=knob.default, label=label, info=knob.help, max_lines=1, **kwargs)
    if knob.kind is str:
        return gr.Dropdown(list(knob.choices()), value=knob.default, label=label, info=knob.help, **kwargs)
    top = hi if hi is not None else (knob.ui_hi if knob.ui_hi is not None else knob.hi)
    if knob.name == "seed" or knob.lo is None or top is None:
        return gr.Number(value=knob.default, precision=0 if knob.kind is int else None, minimum=knob.lo, label=label,
                         info=knob.help, **kwargs)
    return gr.Slider(knob.lo, top, value=knob.default, step=knob.step, label=label, info=knob.help, **kwargs)


@dataclass
class Knobs:
    """The decode knobs of one tab, by name (only those the tab shows); element ids ``PREFIX-NAME``."""

    prefix: str
    controls: dict = field(default_factory=dict)

    def add(self, name: str, **kwargs) -> gr.components.Component:
        if name == "max_new_tokens":  # the slider ends at the limit in force
            kwargs.setdefault("hi", min(KNOB[name].ui_hi, current_limits().max_new_tokens))
            kwargs.setdefault("min_width", 200)
        self.controls[name] = knob_control(KNOB[name], elem_id=f"{self.prefix}-{name.replace('_', '-')}", **kwargs)
        return self.controls[name]

    def __getitem__(self, name: str):
        return self.controls[name]

    def values(self, names: Sequence[str] | None = None) -> list:
        return [self.controls[n] for n in (self.names() if names is None else names)]

    def names(self) -> tuple[str, ...]:
        """The knobs this tab shows, in the order they were added (the order its handler takes them)."""
        return tuple(self.controls)


def _rows_of_two(knobs: Knobs, names: Sequence[str], suffix: str = "") -> None:
    for i in range(0, len(names), 2):
        with gr.Row():
            for name in names[i : i + 2]:
                knobs.add(name, label=UI_LABELS.get(name, KNOB[name].label) + suffix)


def diffusion_knobs(knobs: Knobs, suffix: str = "", names: Sequence[str] | None = None) -> gr.Group:
    """What only the diffusion decoder reads (block length, steps, threshold, strategy, and any
    diffusion knob registered later), in a group the Decode tab hides for AR."""
    names = names or [k.name for k in KNOBS if k.decoders == (DIFFUSION,) and not k.advanced]
    with gr.Group() as group:
        _rows_of_two(knobs, names, suffix)
    return group


# how the app names each decoder (the registry's order: decoding/decoders.py)
DECODER_LABELS = {"diffusion": "Diffusion", "ar": "Autoregressive (AR)", "self-speculative": "Self-speculative",
                  "speculative": "Speculative (AR verifies)"}
DECODER_INFO = ("Self-speculative: the diffusion model drafts tokens and checks them with its own one-token reads. "
                "Speculative: the diffusion model drafts, the AR model verifies.")


def decoder_choices() -> list[tuple[str, str]]:
    """(label, name) of every registered decoder, for the app's decoder pickers."""
    from mudiff_viz.decoding.decoders import DECODERS

    return [(DECODER_LABELS.get(name, d.label), name) for name, d in DECODERS.items()]


def knob_visibility(knobs: Knobs, decoder: str, shown: Sequence[str] | None = None) -> list:
    """One ``gr.update`` per knob of ``shown`` (default: all of the tab's): visible where the chosen
    decoder reads it, so a knob that would change nothing is not offered."""
    return [gr.update(visible=decoder in KNOB[n].decoders) for n in (knobs.names() if shown is None else shown)]


def max_tokens_control(knobs: Knobs) -> gr.components.Component:
    return knobs.add("max_new_tokens")


PRESET_BUTTONS = (("release", "Release settings"), ("defaults", "Our defaults"))
PRESET_HELP = ("**Release settings**: each model as shipped: the MinerU-Diffusion release's demo (temperature 1.0, "
               "block 32, steps 32, threshold 0.95, 4096 tokens); an AR model runs as its own client does "
               "(MinerU2.5: greedy, its 100-gram rule, no token cap below the limits). **Our defaults** differ in "
               "two knobs: temperature 0 (deterministic: one run is every run, and decoders compare token for "
               "token) and 1024 tokens.")


def preset_values(preset: str, names: Sequence[str]) -> list:
    """The controls' values under a preset, in ``names`` order (the token limit cut to the limits in force)."""
    values = preset_knobs(preset, None, current_limits().max_new_tokens)
    return [control_value(KNOB[n], values[n]) for n in names]


def preset_buttons(knobs: Knobs) -> None:
    """Buttons that set every knob of the tab to a preset's values (added after the knobs they set)."""
    gr.Markdown(PRESET_HELP, elem_classes="mudiff-note")
    with gr.Row():
        for preset, label in PRESET_BUTTONS:
            button = gr.Button(label, size="sm", elem_id=f"{knobs.prefix}-preset-{preset}")
            names = knobs.names()
            button.click(functools.partial(preset_values, preset, names), None, knobs.values(names), queue=False,
                         api_visibility="private")


def every_knob(knobs: Knobs) -> gr.Group:
    """Every knob of :data:`KNOBS`, with nothing listed by hand: the diffusion-only ones (returned,
    so the tab can hide them for AR), then the ones both decoders read, the token limit, and the
    advanced ones folded away. A knob registered before the app is built appears here by itself."""
    group = diffusion_knobs(knobs, names=[k.name for k in KNOBS if k.decoders == (DIFFUSION,) and not k.advanced])
    _rows_of_two(knobs, [k.name for k in KNOBS if k.decoders != (DIFFUSION,) and not k.advanced
                         and k.name != "max_new_tokens"])
    max_tokens_control(knobs)
    advanced = [k for k in KNOBS if k.advanced]
    if advanced:
        with gr.Accordion(f"More knobs ({len(advanced)})", open=False, elem_id=f"{knobs.prefix}-more-knobs",
                          elem_classes="mudiff-more-knobs"):
            gr.Markdown(", ".join(k.label for k in advanced).capitalize() + ".", elem_classes="mudiff-note")
            _rows_of_two(knobs, [k.name for k in advanced])
    preset_buttons(knobs)
    return group


# ---- which modes and tasks a model can run ---------------------------------------------------------

NANO_KINDS = ("nano", "nano_char")  # the registry's model types of the embedded pairs
NANO_NOTE = ("Off for the nano pairs: they read text lines, with no layout pass and no table, formula or "
             "layout prompt (the MinerU models offer every mode and task).")
NANO_TASK_NOTE = "Off for the nano pairs: they read text only."
LAYOUT_TASK_NOTE = "Off in layout mode: each block is read with its own type's prompt (the task is page mode's)."


@dataclass(frozen=True)
class ModeOffer:
    """The modes and tasks the Decode tab offers for one model, and in words why the others are off."""

    modes: tuple[str, ...]
    tasks: tuple[str, ...]
    task_applies: bool  # page mode reads the page with the task's prompt; layout mode picks a prompt per block
    mode_note: str = ""
    task_note: str = ""


def reads_text_only(spec: str) -> bool:
    """Whether ``spec`` is a nano pair (an embedded family's name, or a directory of nano weights),
    told from its name or its config.json without loading anything. A real model, a hub id or a
    path that is not a model: False (a run then says what is wrong, in one line)."""
    if models.family_of(spec) is not None:
        return True
    path = Path(spec).expanduser()
    if not path.is_dir():
        return False
    try:
        return registry.model_kind(path) in NANO_KINDS
    except ModelLoadError:
        return False


def mode_offer(spec: str | None, mode: str = "page") -> ModeOffer:
    """What makes sense for the chosen model: the nano pairs run page mode with the text prompt
    only (they were never taught a layout pass or other prompts); the MinerU models run every mode
    and task, the task mattering in page mode only."""
    if reads_text_only(spec or "nano"):
        return ModeOffer(("page",), ("text",), True, NANO_NOTE, NANO_TASK_NOTE)
    layout = mode == "layout"
    return ModeOffer(MODES, TASKS, not layout, "", LAYOUT_TASK_NOTE if layout else "")


def offer_props(offer: ModeOffer, mode: str, task: str) -> tuple[dict, dict]:
    """The mode and task controls' properties under an offer: a choice that is off is not
    interactive and its info line says why; a value the model cannot run falls back to one it can."""
    def props(name: str, choices: tuple[str, ...], open_: bool, value: str, note: str) -> dict:
        return {"interactive": open_ and len(choices) > 1, "value": value if value in choices else choices[0],
                "info": note or KNOB[name].help}

    return (props("mode", offer.modes, True, mode, offer.mode_note),
            props("task", offer.tasks, offer.task_applies, task, offer.task_note))


def mode_updates(spec: str | None, mode: str, task: str) -> tuple:
    """Wired to the model picker and the mode control: the two controls' updates."""
    mode_props, task_props = offer_props(mode_offer(spec, mode), mode, task)
    return gr.update(**mode_props), gr.update(**task_props)


def offer_modes(knobs: Knobs, spec: str | None) -> None:
    """The first model's offer, set on the controls before the app is served (no event needed)."""
    for name, props in zip(("mode", "task"), offer_props(mode_offer(spec), KNOB["mode"].default, KNOB["task"].default)):
        for key, value in props.items():
            setattr(knobs[name], key, value)


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
    panel: gr.Accordion | None = None  # opened when a word on the preview is clicked

    @property
    def inputs(self) -> list:
        return [self.words, self.fraction, self.dpi, self.blur, self.noise, self.jpeg, self.rotate, self.seed]

    @property
    def preview_inputs(self) -> list:
        return [self.words, self.fraction, self.seed]


def perturb_panel(prefix: str, open_: bool = False) -> PerturbPanel:
    with gr.Accordion("Perturb the page (occlusion, degradation)", open=open_, elem_id=f"{prefix}-perturb") as panel:
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
    return PerturbPanel(words, clear, fraction, dpi, blur, noise, jpeg, rotate, seed, panel)


def preview_event_kwargs(picker: PagePicker) -> dict:
    """How every event that redraws ``picker``'s preview is registered (the page load's first preview
    included): queued one at a time per picker, the last trigger winning, so responses land in order."""
    return {"queue": True, "concurrency_limit": 1, "concurrency_id": f"preview-{id(picker)}",
            "trigger_mode": "always_last", "show_progress": "hidden", "api_visibility": "private"}


def wire_picker(picker: PagePicker, perturb: PerturbPanel | None = None, around: Sequence[gr.Accordion] = ()) -> None:
    """Every change of the file, the page number or the chosen words redraws the preview at once;
    clicking a word on the preview toggles it in the occlusion list and opens the Perturb panel (and
    the ``around`` accordions that hold it), so the click is seen; a new file or page clears the list."""
    # Queued one at a time per picker, the last trigger winning: responses then arrive in order, so a
    # slow preview of an older choice (or of a cleared file) never lands on top of a newer one. The page
    # number listens to user input only: the file's own event sets it back to 1 and renders that page,
    # and a change event there would queue a second preview carrying the inputs of that moment.
    quiet = preview_event_kwargs(picker)
    if picker.drop is not None:  # a dropped file becomes the page (its change event draws the preview); the zone empties
        picker.drop.upload(lambda f: (f, None), picker.drop, [picker.file, picker.drop], queue=False,
                           show_progress="hidden", api_visibility="private")
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

    panels = [a for a in (*around, perturb.panel) if a is not None]

    def click(file, number, words, evt: gr.SelectData):
        try:
            x, y = evt.index
            chosen = pagework.toggle_word(file, number, words, float(x), float(y))
        except Exception:  # a click on a page that failed to load: nothing to pick
            return (gr.skip(),) * (1 + len(panels))
        return (chosen, *(gr.Accordion(open=True) for _ in panels))

    picker.preview.select(click, [picker.file, picker.number, perturb.words], [perturb.words, *panels], **quiet)
