"""Checks that need no model, run before a decode joins the decode queue.

A Run button first runs its check on the model-free queue (:data:`~mudiff_viz.ui.capacity.LIGHT_WORK`):
the page loads (from the cache its preview filled), the page number exists, the probes parse, the
chosen model is installed. Only when that passes does the decode itself queue for a model slot, so
a visitor with page 150 of a 3-page PDF hears so at once instead of after every decode ahead.
"""

from __future__ import annotations

import inspect
from typing import Callable

from mudiff_viz.probes.apply import probe_spec
from mudiff_viz.ui import models, pagework, results
from mudiff_viz.ui.capacity import LIGHT_SLOTS, LIGHT_WORK
from mudiff_viz.ui.common import user_errors


def check_page_and_models(file, page_number, decoders: dict[str, str | None], probes=None) -> None:
    """Raise the decode's own one-line error for a page, probe or model it would refuse."""
    if probes is not None:
        pagework.prepare_page(file, page_number, probes)  # the decode's own loader (the page it will decode)
    else:
        pagework.load(file, page_number)
    for decoder, spec in decoders.items():
        models.check(spec or "nano", decoder)


def check_step(names: tuple[str, ...], check: Callable[..., None]) -> Callable:
    """A callback for the Run button's first step: on success it leaves every output as it is
    (``gr.skip``); on failure the reason goes to the status line and the toast, as the decode's would."""
    import gradio as gr

    def step(*args, **kwargs):
        check(*args, **kwargs)
        yield tuple(gr.skip() for _ in names)

    wrapped = user_errors(results.shows_failure(names)(step))
    wrapped.__name__ = getattr(check, "__name__", "check_inputs")
    wrapped.__signature__ = inspect.signature(check)  # the API names the check's inputs as the run's
    return wrapped


def checked_then(button, check: Callable, run: Callable, inputs: list, outputs: list, api_name: str, **run_kwargs):
    """Wire ``button``: ``check`` on the model-free queue, then (only if it passed) ``run`` on the decode queue."""
    first = button.click(check, inputs, outputs, concurrency_id=LIGHT_WORK, concurrency_limit=LIGHT_SLOTS,
                         api_name=f"{api_name}_check", show_progress="hidden")
    return first.success(run, inputs, outputs, api_name=api_name, **run_kwargs)


def probes_of(occlude_words="", occlude_fraction=0.0, degrade_dpi=150, blur=0.0, noise=0.0, jpeg=0, rotate=0.0,
              probe_seed=0):
    """The probes as the Perturb panel's inputs describe them (raises the probe's one-line error)."""
    return probe_spec(occlude_words, occlude_fraction, degrade_dpi, blur, noise, jpeg, rotate, probe_seed)
