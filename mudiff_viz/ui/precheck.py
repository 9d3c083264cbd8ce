"""Checks that need no model, run before a decode joins the decode queue.

A Run button first runs its check on the model-free queue (:data:`~mudiff_viz.ui.capacity.LIGHT_WORK`):
the page loads (from the cache its preview filled), the page number exists, the probes parse, the
chosen model is installed. Only when that passes does the decode itself queue for a model slot, so
a visitor with page 150 of a 3-page PDF hears so at once instead of after every decode ahead.
"""

from __future__ import annotations

import inspect
from typing import Callable

import gradio as gr

from mudiff_viz.probes.apply import probe_spec
from mudiff_viz.ui import jobs, models, pagework, results
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
    def step(*args, **kwargs):
        check(*args, **kwargs)
        yield tuple(gr.skip() for _ in names)

    wrapped = user_errors(results.shows_failure(names)(step))
    wrapped.__name__ = getattr(check, "__name__", "check_inputs")
    wrapped.__signature__ = inspect.signature(check)  # the API names the check's inputs as the run's
    return wrapped


def checked_then(button, check: Callable, run: Callable, inputs: list, outputs: list, api_name: str, stop=None,
                 stopped: Callable[[], tuple] | None = None, **run_kwargs):
    """Wire ``button``: ``check`` on the model-free queue, then (only if it passed) ``run`` on the decode queue.

    With a ``stop`` button, the run button gives it its place while ``run`` runs: Gradio would drop a
    second click on the run button without a word (one run per button at a time), so the only
    button in sight is the one that ends the run. Stop cancels the run (the decode ends at its next
    block and frees its model slot) and puts ``stopped()`` (values for ``outputs``) on screen."""
    first = button.click(check, inputs, outputs, concurrency_id=LIGHT_WORK, concurrency_limit=LIGHT_SLOTS,
                         api_name=f"{api_name}_check", show_progress="hidden")
    if stop is None:
        return first.success(run, inputs, outputs, api_name=api_name, **run_kwargs)
    quiet = {"queue": False, "show_progress": "hidden", "api_visibility": "private"}
    started = first.success(lambda: running(True), None, [button, stop], **quiet)
    runs = started.then(run, inputs, outputs, api_name=api_name, **run_kwargs)
    runs.then(lambda: running(False), None, [button, stop], **quiet)
    ended = stop.click(stop_runs, None, None, cancels=[runs], **quiet)
    ended.then(lambda: (*running(False), *(stopped() if stopped else ())), None, [button, stop, *(outputs if stopped else [])],
               **quiet)
    return runs


def stop_runs(request: gr.Request):
    """Stop's own step: the session's running decodes stop at their next block (Gradio's cancel
    alone waits until the run's thread lets go of its generator)."""
    jobs.stop_session(getattr(request, "session_hash", None))


def running(yes: bool) -> tuple:
    """(run button, stop button) updates: while a run runs, Stop takes the run button's place."""
    return gr.update(visible=not yes), gr.update(visible=yes)


def probes_of(occlude_words="", occlude_fraction=0.0, degrade_dpi=150, blur=0.0, noise=0.0, jpeg=0, rotate=0.0,
              probe_seed=0):
    """The probes as the Perturb panel's inputs describe them (raises the probe's one-line error)."""
    return probe_spec(occlude_words, occlude_fraction, degrade_dpi, blur, noise, jpeg, rotate, probe_seed)
