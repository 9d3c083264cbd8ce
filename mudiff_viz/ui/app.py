"""The Gradio app: Decode, Compare (AR vs diffusion), Semantic Shuffle, Trace viewer, How it works.

Layout and wiring only; every callback lives in :mod:`mudiff_viz.ui.callbacks` and every number or
figure comes from :mod:`mudiff_viz.views`. Stable element ids for tests and automation:
``decode-input``, ``decode-run``, ``player``, ``compare-run``, ``compare-player``, ``shuffle-input``,
``shuffle-level``, ``shuffle-seed``, ``shuffle-run``, ``shuffle-player``, ``shuffle-scores``,
``shuffle-bench-run``, ``shuffle-bench-figure``, ``trace-upload``, ``viewer-player``.
"""

from __future__ import annotations

import csv
import os

import gradio as gr  # noqa: E402

from mudiff_viz.core.limits import current as current_limits  # noqa: E402
from mudiff_viz.decoding.strategies import strategy_names  # noqa: E402
from mudiff_viz.ui import callbacks as cb  # noqa: E402
from mudiff_viz.ui import gpu as _gpu  # noqa: F401  (imports `spaces` before anything touches CUDA)
from mudiff_viz.ui import howitworks, models  # noqa: E402
from mudiff_viz.ui import shuffle_callbacks as scb  # noqa: E402
from mudiff_viz.ui.player import Player  # noqa: E402

# Gradio's example cache is a CSV file; a player payload is one (large) field of it
csv.field_size_limit(2**31 - 1)

MODEL_WORK = "model"  # one shared concurrency slot for everything that runs a model

INTRO = """
# mudiff-viz · watch diffusion OCR decode, step by step
A diffusion OCR decoder (MinerU-Diffusion style: a vision encoder feeding a block-diffusion text
decoder) fills a page's text in **parallel**, unmasking the positions it is most sure of first.
Press **Run decode** on the sample page, then play, scrub and hover: every forward pass, every guess
and every confidence is recorded and replayed in your browser.
"""

CSS = """
.gradio-container { max-width: 1560px !important; }
#decode-run, #compare-run, #shuffle-run { min-height: 46px; font-size: 16px; }
.mudiff-note { font-size: 13px; opacity: .85; }
"""


def _decode_tab(samples: list[str], default: str | None, model_choices: list[tuple[str, str]], limits):
    with gr.Row(equal_height=False):
        with gr.Column(scale=4, min_width=300) as page_column:
            page_file = gr.File(label="Page (PDF, PNG or JPEG)", value=default, file_types=[".pdf", ".png", ".jpg", ".jpeg"],
                                elem_id="decode-input", height=110)
            page_no = gr.Number(value=1, minimum=1, maximum=1, precision=0, label="PDF page", interactive=False)
        with gr.Column(scale=3, min_width=220):
            preview = gr.Image(label="Page preview", height=300, interactive=False, buttons=[])
            page_info = gr.Markdown(elem_classes="mudiff-note")
        with gr.Column(scale=5, min_width=320):
            with gr.Row():
                decoder = gr.Radio([("Diffusion", "diffusion"), ("Autoregressive (AR)", "ar")], value="diffusion",
                                   label="Decoder")
                model = gr.Dropdown(model_choices, value=model_choices[0][1], label="Model")
            model_note = gr.Markdown(_missing_note(), visible=bool(_missing_note()), elem_classes="mudiff-note")
            with gr.Group(visible=True) as diffusion_knobs:
                with gr.Row():
                    block_length = gr.Slider(1, 128, value=32, step=1, label="Block length")
                    steps = gr.Slider(1, 128, value=32, step=1, label="Steps per block (max)")
                with gr.Row():
                    threshold = gr.Slider(0.0, 1.0, value=0.95, step=0.01, label="Confidence threshold")
                    strategy = gr.Dropdown(list(strategy_names()), value="low_confidence_dynamic", label="Remasking strategy")
            with gr.Row():
                temperature = gr.Slider(0.0, 2.0, value=0.0, step=0.05, label="Temperature (0 = deterministic)")
                seed = gr.Number(value=0, precision=0, label="Seed", minimum=0)
                max_tokens = gr.Slider(8, min(4096, limits.max_new_tokens), value=1024, step=8, label="Max tokens per region")
            run = gr.Button("Run decode", variant="primary", elem_id="decode-run")
    status = gr.Markdown(elem_id="decode-status")
    player = Player(elem_id="player")
    downloads = gr.File(label="Downloads: the trace (JSON, replays in the Trace viewer) and an offline replay (HTML, opens in any browser)",
                        file_count="multiple", interactive=False, elem_id="decode-downloads")
    with gr.Accordion("Whole-run figures", open=True):
        fig_order = gr.Plot(show_label=False)
        with gr.Row():
            fig_conf = gr.Plot(show_label=False)
            fig_tpf = gr.Plot(show_label=False)

    inputs = [page_file, page_no, model, decoder, block_length, steps, threshold, temperature, strategy, seed, max_tokens]
    outputs = [status, player, fig_order, fig_conf, fig_tpf, downloads]
    with page_column:
        # bundled samples with the default settings; cached lazily on Spaces (the first click decodes, later ones replay)
        gr.Examples(
            examples=[[p, 1, model_choices[0][1], "diffusion", 32, 32, 0.95, 0.0, "low_confidence_dynamic", 0, 1024] for p in samples],
            inputs=inputs, outputs=outputs, fn=cb.run_decode, cache_examples=_cache_examples(), cache_mode="lazy",
            label="Bundled samples (click one)", example_labels=[os.path.basename(p) for p in samples],
        )
    page_file.change(cb.preview_page, [page_file, page_no], [preview, page_no, page_info], queue=False, api_visibility="private")
    page_no.submit(cb.preview_page, [page_file, page_no], [preview, page_no, page_info], queue=False, api_visibility="private")
    decoder.change(lambda d: gr.update(visible=d == "diffusion"), decoder, diffusion_knobs, queue=False,
                   api_visibility="private")
    run.click(cb.run_decode, inputs, outputs, concurrency_id=MODEL_WORK, concurrency_limit=1, api_name="decode",
              scroll_to_output=True)
    return {
        "page_file": page_file, "page_no": page_no, "preview": preview, "page_info": page_info, "decoder": decoder,
        "model": model, "block_length": block_length, "steps": steps, "threshold": threshold, "temperature": temperature,
        "strategy": strategy, "seed": seed, "max_tokens": max_tokens, "run": run, "inputs": inputs, "outputs": outputs,
        "model_note": model_note,
    }


def _cache_examples() -> bool | None:
    """MUDIFF_CACHE_EXAMPLES=1/0 forces it; otherwise Gradio decides (on for Spaces, off locally)."""
    env = os.environ.get("MUDIFF_CACHE_EXAMPLES")
    return None if env is None else env.lower() in ("1", "true", "yes")


def _missing_note() -> str:
    missing = [d for d in ("diffusion", "ar") if not models.nano_installed(d)]
    if not missing:
        return ""
    return ("⚠ " + models.missing_message(missing[0]) +
            " The **Trace viewer** tab replays bundled example traces without any model.")


def _compare_tab(default: str | None, model_choices: list[tuple[str, str]], limits):
    with gr.Row(equal_height=False):
        with gr.Column(scale=4, min_width=300):
            page_file = gr.File(label="Page (PDF, PNG or JPEG)", value=default, file_types=[".pdf", ".png", ".jpg", ".jpeg"],
                                elem_id="compare-input", height=110)
            page_no = gr.Number(value=1, minimum=1, maximum=1, precision=0, label="PDF page", interactive=False)
            page_info = gr.Markdown(elem_classes="mudiff-note")
        with gr.Column(scale=6, min_width=320):
            with gr.Row():
                model_d = gr.Dropdown(model_choices, value=model_choices[0][1], label="Diffusion model")
                model_a = gr.Dropdown(model_choices, value=model_choices[0][1], label="AR model")
            with gr.Row():
                block_length = gr.Slider(1, 128, value=32, step=1, label="Block length (diffusion)")
                steps = gr.Slider(1, 128, value=32, step=1, label="Steps per block (diffusion)")
                threshold = gr.Slider(0.0, 1.0, value=0.95, step=0.01, label="Threshold (diffusion)")
            with gr.Row():
                strategy = gr.Dropdown(list(strategy_names()), value="low_confidence_dynamic", label="Remasking strategy")
                max_tokens = gr.Slider(8, min(4096, limits.max_new_tokens), value=1024, step=8, label="Max tokens per region")
            with gr.Row():
                run = gr.Button("Run AR and diffusion", variant="primary", elem_id="compare-run", scale=3)
                example = gr.Button("Load the bundled example pair (no model)", elem_id="compare-example", scale=2)
    status = gr.Markdown()
    player = Player(elem_id="compare-player")
    table = gr.Dataframe(headers=["metric", "AR", "diffusion"], label="Metrics", interactive=False, wrap=True)
    diff_note = gr.Markdown(elem_classes="mudiff-note")
    with gr.Row():
        diff_ar = gr.HighlightedText(label="AR vs ground truth", elem_id="compare-diff-ar", color_map=cb.tables.DIFF_COLOURS, show_legend=True,
                                     combine_adjacent=True)
        diff_d = gr.HighlightedText(label="Diffusion vs ground truth", elem_id="compare-diff-diffusion", color_map=cb.tables.DIFF_COLOURS, show_legend=True,
                                    combine_adjacent=True)
    with gr.Accordion("Whole-run figures", open=True):
        with gr.Row():
            fig_fwd = gr.Plot(show_label=False)
            fig_wall = gr.Plot(show_label=False)
        with gr.Row():
            fig_conf = gr.Plot(show_label=False)
            fig_order = gr.Plot(show_label=False)
    files = gr.File(label="Downloads: both traces and an offline replay (HTML)", file_count="multiple", interactive=False)

    page_file.change(lambda f, n: cb.preview_page(f, n)[1:], [page_file, page_no], [page_no, page_info], queue=False,
                     api_visibility="private")
    outputs = [status, player, table, diff_note, diff_ar, diff_d, fig_fwd, fig_wall, fig_conf, fig_order, files]
    run.click(cb.run_compare, [page_file, page_no, model_d, model_a, block_length, steps, threshold, strategy, max_tokens],
              outputs, concurrency_id=MODEL_WORK, concurrency_limit=1, api_name="compare", scroll_to_output=True)
    example.click(cb.compare_examples, None, outputs, api_name="compare_examples", scroll_to_output=True)
    return {"run": run, "page_file": page_file, "page_no": page_no, "page_info": page_info}


SHUFFLE_INTRO = """
### Semantic Shuffle: keep the glyphs, break the meaning
**Our reconstruction** of the paper's Semantic Shuffle, whose exact construction is unpublished
(ours is described in `docs/semantic-shuffle.md`). Words are permuted inside
each line (level = the fraction of each line's words that move, seeded) and written back in place,
same fonts and positions: the page looks the same but reads as nonsense. A decoder that reads the
glyphs should not care; one that leans on its language prior will "correct" the nonsense.
The **left column** is the page re-rendered with every word in place (level 0), the **right column**
the shuffled page; **top row diffusion, bottom row AR**. All four panes play on one clock; tokens are
coloured **right (blue) or wrong (orange) against each page's own ground truth**.
"""


def _shuffle_tab(default: str | None, model_choices: list[tuple[str, str]], limits):
    gr.Markdown(SHUFFLE_INTRO, elem_classes="mudiff-note")
    with gr.Row(equal_height=False):
        with gr.Column(scale=4, min_width=300):
            page_file = gr.File(label="Page (PDF with a text layer, or an image)", value=default,
                                file_types=[".pdf", ".png", ".jpg", ".jpeg"], elem_id="shuffle-input", height=110)
            page_no = gr.Number(value=1, minimum=1, maximum=1, precision=0, label="PDF page", interactive=False)
            page_info = gr.Markdown(elem_classes="mudiff-note")
        with gr.Column(scale=6, min_width=320):
            with gr.Row():
                level = gr.Slider(0.0, 1.0, value=1.0, step=0.25, label="Shuffle level: fraction of each line's words moved",
                                  elem_id="shuffle-level", scale=3)
                seed = gr.Number(value=0, precision=0, minimum=0, label="Seed", elem_id="shuffle-seed", scale=1, min_width=90)
            model = gr.Dropdown(model_choices, value=model_choices[0][1], label="Model (its diffusion and AR twins)")
            with gr.Accordion("Decoder settings", open=False):
                with gr.Row():
                    block_length = gr.Slider(1, 128, value=32, step=1, label="Block length (diffusion)")
                    steps = gr.Slider(1, 128, value=32, step=1, label="Steps per block (diffusion)")
                    threshold = gr.Slider(0.0, 1.0, value=0.95, step=0.01, label="Threshold (diffusion)")
                    max_tokens = gr.Slider(8, min(4096, limits.max_new_tokens), value=1024, step=8,
                                           label="Max tokens per region")
            run = gr.Button("Shuffle and decode (4 runs)", variant="primary", elem_id="shuffle-run")
    status = gr.Markdown(elem_id="shuffle-status")
    player = Player(elem_id="shuffle-player")
    table = gr.Dataframe(headers=["decoder", "CER original", "CER shuffled", "change (points)", "wrong tokens",
                                  "confidently wrong"], label="Scores against each page's ground truth",
                         interactive=False, wrap=True, elem_id="shuffle-scores")
    with gr.Accordion("Decoded text against ground truth (orange: substituted, green: expected, pink: extra, blue: missing)",
                      open=False):
        diffs = []
        for decoder in ("diffusion", "AR"):
            with gr.Row():
                for column in ("original", "shuffled"):
                    diffs.append(gr.HighlightedText(label=f"{decoder} · {column} page", color_map=cb.tables.DIFF_COLOURS,
                                                    show_legend=False, combine_adjacent=True,
                                                    elem_id=f"shuffle-diff-{decoder.lower()}-{column}"))
    files = gr.File(label="Downloads: the shuffled page and the four traces", file_count="multiple", interactive=False,
                    elem_id="shuffle-downloads")
    gr.Markdown("### Benchmark over the bundled samples\nEvery bundled page at each ticked level and seed, through "
                "both decoders; CER against each shuffled page's ground truth. The same run as "
                "`python -m mudiff_viz shuffle-bench` (results in `docs/semantic-shuffle.md`).", elem_classes="mudiff-note")
    with gr.Row(equal_height=True):
        levels = gr.CheckboxGroup([("0", 0.0), ("0.25", 0.25), ("0.5", 0.5), ("1", 1.0)], value=list(scb.BENCH_LEVELS),
                                  label="Levels", elem_id="shuffle-bench-levels", scale=3)
        seeds = gr.Slider(1, 5, value=1, step=1, label="Seeds", elem_id="shuffle-bench-seeds", scale=2)
        bench = gr.Button("Run the benchmark", elem_id="shuffle-bench-run", scale=2)
    bench_status = gr.Markdown(elem_id="shuffle-bench-status")
    bench_fig = gr.Plot(show_label=False, elem_id="shuffle-bench-figure", visible=False)
    bench_table = gr.Dataframe(label="Benchmark summary", interactive=False, wrap=True, elem_id="shuffle-bench-table",
                               visible=False)
    bench_files = gr.File(label="Downloads: results.json, results.csv, summary.json, figure.html", file_count="multiple",
                          interactive=False, visible=False)

    page_file.change(lambda f, n: cb.preview_page(f, n)[1:], [page_file, page_no], [page_no, page_info], queue=False,
                     api_visibility="private")
    knobs = [block_length, steps, threshold, max_tokens]
    run.click(scb.run_shuffle, [page_file, page_no, level, seed, model, *knobs], [status, player, table, *diffs, files],
              concurrency_id=MODEL_WORK, concurrency_limit=1, api_name="shuffle", scroll_to_output=True)
    bench.click(scb.run_shuffle_bench, [levels, seeds, model, *knobs], [bench_status, bench_fig, bench_table, bench_files],
                concurrency_id=MODEL_WORK, concurrency_limit=1, api_name="shuffle_bench")
    return {"page_file": page_file, "page_no": page_no, "page_info": page_info}


def _viewer_tab():
    gr.Markdown("Replay a saved trace with no model loaded: one trace, or two (AR + diffusion of the same page) to "
                "play them on one clock. Traces made from a bundled sample find their page image automatically.",
                elem_classes="mudiff-note")
    with gr.Row(equal_height=False):
        files = gr.File(label="Trace JSON (one, or two to compare)", file_count="multiple", file_types=[".json"],
                        elem_id="trace-upload", height=120, scale=3)
        page = gr.File(label="Page image or PDF (optional: for traces of your own pages)", file_types=[".pdf", ".png", ".jpg", ".jpeg"],
                       height=120, scale=2)
        with gr.Column(scale=2, min_width=220):
            replay = gr.Button("Replay", variant="primary", elem_id="trace-replay")
            ex_d = gr.Button("Example: diffusion trace", elem_id="trace-example-diffusion")
            ex_c = gr.Button("Example: AR vs diffusion", elem_id="trace-example-compare")
    status = gr.Markdown()
    player = Player(elem_id="viewer-player")
    downloads = gr.File(label="Downloads: the trace(s) and an offline replay (HTML)", file_count="multiple",
                        interactive=False)
    table = gr.Dataframe(headers=["metric", "AR", "diffusion"], label="Metrics", interactive=False, visible=False, wrap=True)
    fig_prog = gr.Plot(show_label=False, visible=False)
    with gr.Accordion("Whole-run figures", open=True):
        fig_order = gr.Plot(show_label=False)
        with gr.Row():
            fig_conf = gr.Plot(show_label=False)
            fig_tpf = gr.Plot(show_label=False)
    outputs = [status, player, fig_order, fig_conf, fig_tpf, downloads, table, fig_prog]
    replay.click(cb.view_traces, [files, page], outputs, api_name="view_trace", scroll_to_output=True)
    files.upload(cb.view_traces, [files, page], outputs, api_visibility="private")
    ex_d.click(lambda: cb.view_example("diffusion"), None, outputs, api_name="view_example", scroll_to_output=True)
    ex_c.click(lambda: cb.view_example("compare"), None, outputs, api_visibility="private", scroll_to_output=True)


def _howitworks_tab(tabs, decode: dict):
    gr.Markdown("### How diffusion decoding works: six ideas, each one button away from a live run")
    controls = [decode[k] for k in ("decoder", "block_length", "steps", "threshold", "temperature", "strategy")]
    for i in range(0, len(howitworks.LESSONS), 2):
        with gr.Row(equal_height=True):
            for lesson in howitworks.LESSONS[i : i + 2]:
                with gr.Column(variant="panel"):
                    gr.Markdown(f"#### {lesson.title}\n{lesson.body}")
                    btn = gr.Button(lesson.button, size="sm", elem_id=f"lesson-{lesson.key}")
                    s = howitworks.settings_for(lesson)
                    values = (s["decoder"], s["block_length"], s["steps"], s["threshold"], s["temperature"], s["strategy"])
                    if lesson.tab == "compare":
                        btn.click(lambda: gr.Tabs(selected="compare"), None, tabs, queue=False, api_visibility="private")
                    else:
                        btn.click(lambda v=values: (*v, gr.Tabs(selected="decode")), None, controls + [tabs], queue=False,
                                  api_visibility="private").then(
                            cb.run_decode, decode["inputs"], decode["outputs"], concurrency_id=MODEL_WORK, concurrency_limit=1,
                            api_visibility="private", scroll_to_output=True)
    gr.Markdown(howitworks.READING_GUIDE)


def build_app() -> gr.Blocks:
    samples = cb.sample_paths()
    default = cb.default_sample()
    model_choices = models.choices()
    limits = current_limits()
    # delete_cache: Gradio's copies of uploads and downloads older than an hour go, checked every 30 minutes
    with gr.Blocks(title="mudiff-viz: diffusion OCR, step by step", delete_cache=(1800, 3600)) as demo:
        gr.Markdown(INTRO)
        with gr.Tabs(selected="decode") as tabs:
            with gr.Tab("Decode", id="decode"):
                decode = _decode_tab(samples, default, model_choices, limits)
            with gr.Tab("Compare AR vs diffusion", id="compare"):
                compare = _compare_tab(default, model_choices, limits)
            with gr.Tab("Semantic Shuffle", id="shuffle"):
                shuffle = _shuffle_tab(default, model_choices, limits)
            with gr.Tab("Trace viewer", id="viewer"):
                _viewer_tab()
            with gr.Tab("How it works", id="how"):
                _howitworks_tab(tabs, decode)
        demo.load(cb.preview_page, [decode["page_file"], decode["page_no"]],
                  [decode["preview"], decode["page_no"], decode["page_info"]], queue=False, api_visibility="private")
        demo.load(lambda f, n: cb.preview_page(f, n)[1:], [compare["page_file"], compare["page_no"]],
                  [compare["page_no"], compare["page_info"]], queue=False, api_visibility="private")
        demo.load(lambda f, n: cb.preview_page(f, n)[1:], [shuffle["page_file"], shuffle["page_no"]],
                  [shuffle["page_no"], shuffle["page_info"]], queue=False, api_visibility="private")
    return demo


def launch_kwargs() -> dict:
    """Keyword arguments for ``demo.launch``. Host and port come from MUDIFF_HOST / MUDIFF_PORT when
    set; otherwise Gradio's own defaults apply (127.0.0.1:7860, or GRADIO_SERVER_NAME / _PORT, which
    Hugging Face Spaces sets to listen on 0.0.0.0)."""
    kwargs = {
        "run_history": False,  # player payloads are large; nothing to keep in the browser
        "max_file_size": current_limits().max_upload_bytes,  # Gradio refuses bigger uploads before any callback
        "css": CSS,
        "footer_links": ["api", "gradio"],
    }
    if os.environ.get("MUDIFF_HOST"):
        kwargs["server_name"] = os.environ["MUDIFF_HOST"]
    if os.environ.get("MUDIFF_PORT"):
        kwargs["server_port"] = int(os.environ["MUDIFF_PORT"])
    return kwargs
