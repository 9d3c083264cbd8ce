"""Every input of every event checked before Gradio's own preprocessing, so the raw API answers bad
values with one readable line.

Gradio hands a component's raw JSON value to its ``preprocess``: a page number of ``"abc"`` raised a
TypeError there (the API client read ``{"error": null}``), ``NaN`` reached the knobs, a NUL byte
reached ``Path``, and a Dropdown echoed a 5,000-character value whole. :func:`guard_inputs` wraps
the ``preprocess`` of each number, slider, text and choice component: numbers must be finite (and
whole where the component takes integers), strings hold no NUL byte and stay under
:data:`MAX_TEXT_CHARS`; a value is quoted at most :data:`ECHO_CHARS` characters long. Refusals are
``gr.Error`` without a traceback in the server log (they are the visitor's mistake, not a bug).
"""

from __future__ import annotations

import logging
import math
from typing import Any

import gradio as gr

from mudiff_viz.ui.common import error_text

LOG = logging.getLogger(__name__)
ECHO_CHARS = 80  # the most of a visitor's value an error quotes
MAX_TEXT_CHARS = 4096  # a text field (a folder, probe list, level list): longer is refused before use
GUARDED = (gr.Number, gr.Slider, gr.Textbox, gr.Dropdown, gr.Radio)


def echo(value: Any) -> str:
    """A visitor's value as an error quotes it: repr, cut to ECHO_CHARS characters."""
    text = repr(value)
    return text if len(text) <= ECHO_CHARS else text[: ECHO_CHARS - 1] + "…"


def refuse(message: str) -> gr.Error:
    LOG.warning("refused input: %s", message)
    return gr.Error(error_text(message), print_exception=False)


def name_of(component) -> str:
    return str(getattr(component, "label", None) or getattr(component, "elem_id", None) or type(component).__name__)


def check_number(name: str, value: Any, whole: bool) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise refuse(f"{name} must be a number, got {echo(value)}")
    if not math.isfinite(value):
        raise refuse(f"{name} must be a finite number, got {value}")
    if whole and not float(value).is_integer():
        raise refuse(f"{name} must be a whole number, got {value}")


def check_text(name: str, value: Any) -> None:
    if value is None:
        return
    texts = value if isinstance(value, list) else [value]  # a multiselect dropdown
    for text in texts:
        if isinstance(text, (int, float)) and not isinstance(text, bool):
            check_number(name, text, whole=False)
            continue
        if not isinstance(text, str):
            raise refuse(f"{name} must be text, got {echo(text)}")
        if "\0" in text:
            raise refuse(f"{name} holds a NUL byte: {echo(text)}")
        if len(text) > MAX_TEXT_CHARS:
            raise refuse(f"{name} is {len(text):,} characters long (limit {MAX_TEXT_CHARS:,}): {echo(text)}")


def guarded(component) -> None:
    """Check ``component``'s raw value before its own ``preprocess``; its own refusals (a value not
    among a dropdown's choices) are cut to one short line."""
    original = component.preprocess
    name = name_of(component)
    number = isinstance(component, (gr.Number, gr.Slider))
    whole = number and getattr(component, "precision", None) == 0

    def preprocess(payload):
        if number:
            check_number(name, payload, whole)
        else:
            check_text(name, payload)
        try:
            return original(payload)
        except gr.Error as exc:
            raise refuse(shorten(str(exc.message), payload)) from None
        except (TypeError, ValueError) as exc:  # Gradio's own conversion of a value of the wrong kind
            raise refuse(f"{name}: {echo(payload)} is not a valid value ({type(exc).__name__})") from None

    component.preprocess = preprocess


def shorten(message: str, payload: Any) -> str:
    """Gradio's message with the visitor's value quoted at most ECHO_CHARS long, on one line."""
    for value in payload if isinstance(payload, list) else [payload]:
        if isinstance(value, str) and len(value) > ECHO_CHARS:
            message = message.replace(value, value[: ECHO_CHARS - 1] + "…")
    line = message.splitlines()[0] if message else "invalid value"
    return line if len(line) <= 400 else line[:399] + "…"


def guard_inputs(demo: gr.Blocks) -> gr.Blocks:
    """Guard every number, slider, text and choice input of ``demo`` (see the module docstring), and
    the count of inputs a raw API call sends (Gradio's own check is a ValueError: a traceback in the
    server log, ``null`` for the client)."""
    for block in demo.blocks.values():
        if isinstance(block, GUARDED) and not getattr(block, "_mudiff_guarded", False):
            guarded(block)
            block._mudiff_guarded = True
    validate = demo.validate_inputs

    def validate_inputs(block_fn, inputs):
        try:
            return validate(block_fn, inputs)
        except ValueError as exc:
            raise refuse(shorten(str(exc), None)) from None

    demo.validate_inputs = validate_inputs
    return demo
