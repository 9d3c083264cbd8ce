"""The Semantic Shuffle tab (our reconstruction) and its sibling probes: one page, the level-0
control on the left, the same page shuffled, occluded or degraded on the right, both decoders on
both; and the shuffle benchmark over the bundled samples.

The pages and the four decodes live in :mod:`mudiff_viz.probes.pairs`, the benchmark in
:mod:`mudiff_viz.probes.bench`, every table and payload in :mod:`mudiff_viz.views.shuffle`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import gradio as gr

from mudiff_viz.core.errors import UserInputError
from mudiff_viz.core.limits import current as current_limits
from mudiff_viz.decoding.pipeline import make_params
from mudiff_viz.inputs.pages import read_source
from mudiff_viz.probes.apply import probe_spec
from mudiff_viz.probes.bench import (BenchStopped, bench_pages_from_paths, run_shuffle_benchmark, summary_lines,
                                     write_outputs)
from mudiff_viz.probes.pairs import (DECODERS, ShufflePages, decode_grid, further_seed_changes, probe_pages, score_grid,
                                     shuffle_pages)
from mudiff_viz.probes.replay import file_sha256, find_source
from mudiff_viz.ui import controls, jobs, models, pagework, precheck
from mudiff_viz.ui.animation import animation_row
from mudiff_viz.ui.common import file_path, request_dir, safe_stem, sample_paths, user_errors, whole_count, write_trace
from mudiff_viz.ui.gpu import ON_ZERO_GPU
from mudiff_viz.ui.player import Player
from mudiff_viz.ui.results import cleared, ordered, says_why, shows_failure
from mudiff_viz.ui.capacity import DECODE_SLOTS
from mudiff_viz.ui.slot import MODEL_WORK, model_slot
from mudiff_viz.views import shuffle as views
from mudiff_viz.views.page_image import image_data_url

BENCH_LEVELS = (0.0, 0.25, 0.5, 0.75, 1.0)
PROBES = (("Semantic Shuffle (reorder words)", "shuffle"), ("Occlusion (blank words)", "occlude"),
          ("Degradation (a worse scan)", "degrade"))
OUTPUTS = ("status", "player", "table", "diff_do", "diff_ds", "diff_ao", "diff_as", "downloads")

INTRO = """
### Probes: keep the glyphs, break the meaning (or hide the glyphs)
The **left column** is the page re-rendered with every word in place, the **right column** the same page
probed; **top row diffusion, bottom row AR**; all four panes play on one clock, tokens coloured **right (blue)
or wrong (orange) against each page's own ground truth**.
**Semantic Shuffle** (our reconstruction of the paper's unpublished benchmark, `docs/semantic-shuffle.md`)
permutes words inside each line, written back in place: the page looks the same but reads as nonsense, so a
decoder leaning on its language prior "corrects" it. **Occlusion** blanks words (the ground truth keeps them):
a decoder that uses context recovers some, diffusion from both sides, AR only from the left.
**Degradation** makes a worse scan. More in `docs/probes.md`.
"""


def sidecar_text(path: str) -> str | None:
    """Ground truth for an image page: the ``<stem>.txt`` beside the bundled sample with the same
    bytes (Gradio hands the callback a copy in its cache, so the match is by SHA-256)."""
    source = find_source(file_sha256(path))
    if source is None:
        return None
    txt = source.with_suffix(".txt")
    return txt.read_text(encoding="utf-8", errors="replace") if txt.is_file() else None


@model_slot
def shuffle_job(pages: ShufflePages, spec: str, knobs: dict, progress=None, finished=None) -> dict:
    """Both decoders on both pages: four traces keyed (decoder, column); ``finished(key, trace)``
    hears of each as it is done. On ZeroGPU each decode is its own GPU call (jobs.page_decoder)."""
    for decoder in DECODERS:
        models.check(spec, decoder)
    params = {d: make_params(**knobs) for d in DECODERS}
    return decode_grid(pages, {d: spec for d in DECODERS}, params, progress, finished, decode=jobs.page_decoder())


@model_slot
def seeds_job(more: list, control: dict, spec: str, knobs: dict, progress=None) -> dict:
    """The probed page of each further seed through both decoders: CER changes by decoder and seed.
    On ZeroGPU each decode is its own GPU call (jobs.page_decoder)."""
    params = {d: make_params(**knobs) for d in DECODERS}
    return further_seed_changes(more, control, {d: spec for d in DECODERS}, params, progress,
                                decode=jobs.page_decoder())


def _bench_job(pages, levels, seeds: int, spec: str, knobs: dict, progress=None):
    for decoder in DECODERS:
        models.check(spec, decoder)
    return run_shuffle_benchmark(pages, levels=levels, seeds=seeds, model=spec, progress=progress, knobs=knobs,
                                 decode=jobs.page_decoder())


bench_job = model_slot(_bench_job)  # on ZeroGPU one GPU call per decode (jobs.page_decoder)


@dataclass
class GridProgress:
    """What the four decodes (or the benchmark's decodes) have done so far: written by the decoding
    thread, read every second by the handler, which turns it into the status line and the panes
    that can already play."""
    k: int = 0
    what: str = ""
    done: int = 0
    total: int = 0
    finished: dict = field(default_factory=dict)
    check: Callable[[], None] = lambda: None  # jobs.ticking's check: raises Cancelled once the viewer left

    def progress(self, done: int, total: int, what: str) -> None:
        if what != self.what:
            self.what, self.k = what, self.k + 1
        self.done, self.total = done, total
        self.check()

    def finish(self, key, trace) -> None:
        self.finished[key] = trace
        self.check()

    def fraction(self) -> float:
        return 0.0 if not self.k else (self.k - 1 + self.done / max(1, self.total)) / 4


def make_pages(file, page_number, probe: str, level, seed, occlude_fraction, degrade_dpi, blur, noise, jpeg,
               rotate) -> ShufflePages:
    """The control and the probed page, from the tab's controls (bad values: one-line errors)."""
    path = file_path(file)
    pagework.load(file, page_number)  # every upload check, rendered in the isolated worker (and cached)
    limits = current_limits()
    index = pagework.page_number(page_number) - 1
    data, _ = read_source(path, limits)
    common = dict(page_index=index, gt_text=sidecar_text(path), limits=limits, name=Path(path).name)
    if probe == "shuffle":
        return shuffle_pages(data, float(level), int(seed or 0), **common)
    if probe == "occlude":
        if not occlude_fraction:
            raise UserInputError("set the share of words to occlude (above 0)")
        spec = probe_spec(occlude_fraction=occlude_fraction, seed=seed)
    elif probe == "degrade":
        spec = probe_spec(dpi=degrade_dpi, blur=blur, noise=noise, jpeg=jpeg, rotate=rotate, seed=seed)
    else:
        raise UserInputError(f"unknown probe {probe!r}; choose shuffle, occlude or degrade")
    return probe_pages(data, spec, **common)


SEEDS = 3  # the grid's seed and two more: a change is shown beside its seed spread
MAX_SEEDS = 5


def seed_count(seeds) -> int:
    """The seeds control as a count, checked (a bad value: a one-line error)."""
    return whole_count(seeds, "seeds", SEEDS, MAX_SEEDS)


@user_errors
@shows_failure(OUTPUTS)
def run_shuffle(file, page_number, level, seed, spec, knobs: dict, probe="shuffle", occlude_fraction=0.1, degrade_dpi=72,
                blur=0.0, noise=0.0, jpeg=0, rotate=0.0, seeds=SEEDS, progress=gr.Progress()):
    """Probe one page and decode both pages with both decoders; the grid, scores, diffs, files; then
    the probed page of each further seed, so the change is judged against its seed spread."""
    n_seeds = seed_count(seeds)
    yield ordered(cleared(OUTPUTS, "Preparing the pages…", "Decoding four times: both decoders on both pages."), OUTPUTS)
    progress(0, desc="preparing the control and the probed page")
    probe_args = (occlude_fraction, degrade_dpi, blur, noise, jpeg, rotate)
    pages = make_pages(file, page_number, probe, level, seed, *probe_args)
    knobs = {"seed": int(seed or 0), **knobs}  # the probe's seed seeds the sampler too (the other knobs: their defaults)
    spec = spec or "nano"
    images = page_images(pages)  # encoded once: the streamed panes and the result show the same two pages
    if ON_ZERO_GPU:  # four GPU calls, one per decode, made from this thread (spaces reads the request here)
        progress(0, desc="decoding four times on the GPU")
        traces = shuffle_job(pages, spec, knobs)
    else:
        traces = yield from streamed_grid(pages, spec, knobs, progress, images)
    out = shuffle_outputs(pages, traces, Path(file_path(file)).name, images)
    if n_seeds > 1 and pages.shuffled is not pages.original and any(out["scores"].values()):
        # the grid plays while the further seeds decode; the table, diffs and files come with the verdict
        # (an output sent twice with the same update reaches an API client without its value)
        yield ordered({"player": out["player"], "status": out["status"] + "  \n" + views.SPREAD_PENDING.format(n=n_seeds - 1)},
                      OUTPUTS)
        first = int(seed or 0)
        more = [(s, make_pages(file, page_number, probe, level, s, *probe_args)) for s in range(first + 1, first + n_seeds)]
        changes = yield from streamed_seeds(more, out["scores"], spec, knobs, progress, out["status"])
        out["status"] = shuffle_status(pages, out["scores"], changes)
    else:
        out["status"] = shuffle_status(pages, out["scores"], None)
    yield ordered(out, OUTPUTS)


def shuffle_status(pages: ShufflePages, scores: dict, further: dict | None) -> str:
    """The headline with, per decoder, the change under every seed measured and what it means."""
    changes = views.seed_changes(scores, pages.seed, further)
    return views.summary_markdown(scores, pages.level, pages.seed, pages.lines_changed, pages.lines_total, pages.probe,
                                  pages.description, changes=changes)


def streamed_seeds(more: list, scores: dict, spec: str, knobs: dict, progress, head: str = ""):
    """The further seeds' decodes in a worker thread with a status line every second (under ``head``,
    the grid's own numbers); returns the CER changes by decoder and seed (closing it cancels them)."""
    if ON_ZERO_GPU:
        return seeds_job(more, scores, spec, knobs)
    state, start = GridProgress(), time.monotonic()

    def job(check):
        state.check = check
        return seeds_job(more, scores, spec, knobs, state.progress)

    for done, result in jobs.ticking(job):
        if done:
            return result
        progress(state.done / max(1, state.total), desc="further seeds")
        line = views.seeds_progress_markdown(state.done, state.total, state.what, time.monotonic() - start)
        yield ordered({"status": f"{head}  \n{line}" if head else line}, OUTPUTS)


def page_images(pages: ShufflePages) -> dict[str, str]:
    """The control and the probed page as data URLs, by column (what every grid payload shows)."""
    return {col: image_data_url(pages.page(col).page.image) for col in ("original", "shuffled")}


def streamed_grid(pages: ShufflePages, spec: str, knobs: dict, progress, images: dict | None = None):
    """The four decodes in a worker thread; every second a status line that moves and, once a pane is
    done, the panes done so far in the player; returns the four traces (closing it cancels them)."""
    state = GridProgress()
    images = images or page_images(pages)
    start, shown = time.monotonic(), 0

    def job(check):
        state.check = check
        return shuffle_job(pages, spec, knobs, state.progress, state.finish)

    for done, result in jobs.ticking(job):  # a tick: redraw from ``state``
        if done:
            return result
        frame = {"status": views.progress_markdown(state.k, state.what, state.done, state.total, len(state.finished),
                                                   time.monotonic() - start)}
        if len(state.finished) > shown:
            shown = len(state.finished)
            frame["player"] = views.grid_payload(dict(state.finished), images, pages.level, pages.probe)
        progress(state.fraction(), desc=f"decode {max(1, state.k)} of 4")
        yield ordered(frame, OUTPUTS)


def check_shuffle(file, page_number, level, seed, spec, *rest) -> None:
    """What run_shuffle refuses before it needs a model (the Run button's first, model-free step)."""
    precheck.check_page_and_models(file, page_number, {"ar": spec, "diffusion": spec})


def shuffle_outputs(pages: ShufflePages, traces: dict, name: str, images: dict | None = None) -> dict:
    """Status, grid payload, score table, four diffs, downloads (the probed page + four traces)."""
    scores = score_grid(traces, pages)
    images = images or page_images(pages)
    headers, rows = views.score_table(scores, pages.level, pages.probe)
    outdir = request_dir()
    stem = safe_stem(name)
    files = []
    if pages.shuffled.result is not None:
        shuffled_file = outdir / f"{stem}.shuffled-{pages.level:g}-seed{pages.seed}.{pages.shuffled.result.kind}"
        shuffled_file.write_bytes(pages.shuffled.result.data)
        files.append(str(shuffled_file))
    else:
        probed_file = outdir / f"{stem}.{views.PROBE_NAMES[pages.probe]}.png"
        pages.shuffled.page.image.save(probed_file)
        files.append(str(probed_file))
    for decoder, column in views.GRID:
        files.append(write_trace(traces[(decoder, column)], outdir, f"{stem}.{column}"))
    diffs = views.pane_diff_html(traces, {col: pages.page(col).gt_text for col in ("original", "shuffled")})
    return {
        "scores": scores,  # not an output: run_shuffle judges the change against further seeds with it
        "status": views.summary_markdown(scores, pages.level, pages.seed, pages.lines_changed, pages.lines_total,
                                         pages.probe, pages.description),
        "player": views.grid_payload(traces, images, pages.level, pages.probe),
        "table": gr.update(value=rows, headers=headers),
        **dict(zip(("diff_do", "diff_ds", "diff_ao", "diff_as"), diffs)),
        "downloads": files,
    }


def bundled_bench_pages():
    """The bundled samples as benchmark inputs (our own files: rendered in-process)."""
    pages = bench_pages_from_paths(sample_paths())
    for p in pages:
        p.trusted = True
    return pages


def bench_stop() -> dict:
    """The Stop button's flag for one browser session's benchmark (a gr.State, plain data: Stop
    sets it, the running benchmark reads it after each decode and returns what finished, partial)."""
    return {"requested": False}


@user_errors
def run_shuffle_bench(levels, seeds, spec, knobs: dict, stop: dict | None = None, progress=gr.Progress()):
    """The benchmark over the bundled samples in a worker thread: a status line every second, then
    summary, figure, table, downloads. Stop ends it after the decode in progress and shows what
    finished, marked partial; leaving the page ends it too (jobs.ticking) and frees the model slot."""
    chosen = sorted({float(v) for v in (levels or [])})
    if not chosen:
        raise UserInputError("tick at least one shuffle level")
    stop = stop if stop is not None else bench_stop()
    stop["requested"] = False
    progress(0, desc="loading the bundled samples")
    pages, n_seeds, spec = bundled_bench_pages(), int(seeds or 1), spec or "nano"
    if ON_ZERO_GPU:  # one GPU call per decode, made from this thread (spaces reads the request here)
        result = bench_job(pages, chosen, n_seeds, spec, knobs, None)
    else:
        state, start = GridProgress(), time.monotonic()  # its progress() hears of each decode and checks for Stop

        def job(check):
            def check_both() -> None:
                check()  # the viewer left: Cancelled, nothing to show
                if stop["requested"]:  # Stop: the benchmark returns what finished
                    raise BenchStopped()

            state.check = check_both
            return bench_job(pages, chosen, n_seeds, spec, knobs, state.progress)

        for done, result in jobs.ticking(job):
            if done:
                break
            yield (views.bench_progress_markdown(state.done, state.total, state.what, time.monotonic() - start,
                                                 stopping=stop["requested"]),
                   gr.update(), gr.update(), gr.update())
    paths = write_outputs(result, request_dir() / "shuffle-bench")
    headers, rows = views.bench_table(result.summary)
    text = views.bench_markdown(result, len(pages), n_seeds, chosen) + "  \n" + "  \n".join(summary_lines(result.summary))
    yield (text, gr.update(value=result.figure, visible=True), gr.update(value=rows, headers=headers, visible=True),
           gr.update(value=[str(p) for p in paths.values()], visible=True))


def request_stop(stop: dict) -> str:
    """The Stop button: flag the running benchmark (it stops after the decode in progress)."""
    stop["requested"] = True
    return "Stopping the benchmark after the decode in progress: what finished will show below, marked partial…"


def build(default: str | None, model_choices: list[tuple[str, str]]) -> dict:
    gr.Markdown(INTRO, elem_classes="mudiff-note")
    knobs = controls.Knobs("shuffle")
    with gr.Row(equal_height=False):
        picker = controls.page_picker("shuffle", default, label="Page (PDF with a text layer, or an image)")
        with gr.Column(scale=5, min_width=320):
            probe = gr.Radio(PROBES, value="shuffle", label="Right column: the page…", elem_id="shuffle-probe")
            with gr.Group(visible=True) as shuffle_box:
                level = gr.Slider(0.0, 1.0, value=1.0, step=0.25, label="Shuffle level: fraction of each line's words moved",
                                  elem_id="shuffle-level")
            with gr.Group(visible=False) as occlude_box:
                fraction = gr.Slider(0.05, 0.5, value=0.1, step=0.05, label="Share of words occluded",
                                     elem_id="shuffle-occlude-fraction")
            with gr.Group(visible=False) as degrade_box:
                with gr.Row():
                    dpi = gr.Slider(30, 150, value=72, step=5, label="Scan DPI (150 = as rendered)", elem_id="shuffle-dpi")
                    blur = gr.Slider(0.0, 3.0, value=0.0, step=0.25, label="Blur radius (px)")
                with gr.Row():
                    noise = gr.Slider(0, 40, value=0, step=2, label="Noise (grey levels)")
                    jpeg = gr.Slider(0, 95, value=0, step=5, label="JPEG quality (0 = off)")
                    rotate = gr.Slider(-5.0, 5.0, value=0.0, step=0.25, label="Rotation (degrees)")
            with gr.Row():
                seed = gr.Number(value=0, precision=0, minimum=0, label="Seed (of the probe)", elem_id="shuffle-seed",
                                 min_width=110)
                spread_seeds = gr.Slider(1, MAX_SEEDS, value=SEEDS, step=1, elem_id="shuffle-seeds", min_width=200,
                                         label="Seeds for the spread (the grid plays the first; "
                                               "the others decode the probed page only)")
                model = gr.Dropdown(model_choices, value=model_choices[0][1], label="Model (its diffusion and AR twins)")
            with gr.Accordion("Decoder settings", open=False):
                controls.diffusion_knobs(knobs, suffix=" (diffusion)")
                controls.max_tokens_control(knobs)
            run = gr.Button("Probe and decode (4 runs)", variant="primary", elem_id="shuffle-run")
    status = gr.Markdown(elem_id="shuffle-status")
    player = Player(elem_id="shuffle-player")
    table = gr.Dataframe(headers=["decoder", "CER original", "CER probed", "change (points)", "wrong tokens",
                                  "confidently wrong"], label="Scores against each page's ground truth",
                         interactive=False, wrap=True, elem_id="shuffle-scores")
    with gr.Accordion("Decoded text against ground truth, word by word", open=False):
        diffs = []
        for decoder in ("diffusion", "AR"):
            with gr.Row():
                for column in ("original", "probed"):
                    with gr.Column(min_width=260):
                        gr.Markdown(f"**{decoder} · {column} page**")
                        diffs.append(gr.HTML(elem_id=f"shuffle-diff-{decoder.lower()}-{column}"))
    files = gr.File(label="Downloads: the probed page and the four traces", file_count="multiple", interactive=False,
                    elem_id="shuffle-downloads")
    animation_row("shuffle", files)
    gr.Markdown("### Benchmark over the bundled samples\nEvery bundled page at each ticked level and seed, through "
                "both decoders; CER against each shuffled page's ground truth. The same run as "
                "`python -m mudiff_viz shuffle-bench` (results in `docs/semantic-shuffle.md`).", elem_classes="mudiff-note")
    with gr.Row(equal_height=True):
        levels = gr.CheckboxGroup([(f"{v:g}", v) for v in BENCH_LEVELS], value=[0.0, 1.0],
                                  label="Levels", elem_id="shuffle-bench-levels", scale=3)
        seeds = gr.Slider(1, 5, value=SEEDS, step=1, label="Seeds (their spread judges the change)",
                          elem_id="shuffle-bench-seeds", scale=2)
        bench = gr.Button("Run the benchmark", elem_id="shuffle-bench-run", scale=2)
        stop = gr.Button("Stop", elem_id="shuffle-bench-stop", variant="stop", scale=1, min_width=80)
    bench_status = gr.Markdown(elem_id="shuffle-bench-status")
    bench_fig = gr.Plot(show_label=False, elem_id="shuffle-bench-figure", visible=False)
    bench_table = gr.Dataframe(label="Benchmark summary", interactive=False, wrap=True, elem_id="shuffle-bench-table",
                               visible=False)
    bench_files = gr.File(label="Downloads: results.json, results.csv, summary.json, figure.html", file_count="multiple",
                          interactive=False, visible=False, elem_id="shuffle-bench-files")

    controls.wire_picker(picker)
    probe.change(lambda p: tuple(gr.update(visible=p == k) for k in ("shuffle", "occlude", "degrade")), probe,
                 [shuffle_box, occlude_box, degrade_box], queue=False, api_visibility="private")
    knob_inputs, names = knobs.values(), knobs.names()
    inputs = [picker.file, picker.number, level, seed, model, *knob_inputs, probe, fraction, dpi, blur, noise, jpeg, rotate,
              spread_seeds]
    check = precheck.check_step(OUTPUTS, check_shuffle)
    precheck.checked_then(run, check, controls.with_knobs(run_shuffle, 5, names), inputs,
                          says_why([status, player, table, *diffs, files]), "shuffle", concurrency_id=MODEL_WORK,
                          concurrency_limit=DECODE_SLOTS, scroll_to_output=True, show_progress="minimal")
    stopper = gr.State(bench_stop())
    bench.click(controls.with_knobs(run_shuffle_bench, 3, names), [levels, seeds, model, *knob_inputs, stopper],
                [bench_status, bench_fig, bench_table, bench_files], concurrency_id=MODEL_WORK,
                concurrency_limit=DECODE_SLOTS, api_name="shuffle_bench", show_progress="minimal")
    # Stop flags the running benchmark: it ends after the decode in progress and shows what finished
    stop.click(request_stop, stopper, bench_status, queue=False, api_visibility="private")
    return {"picker": picker}
