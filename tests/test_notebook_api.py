"""The public Python API (``import mudiff_viz as mv``, docs/notebook.md) on the embedded pair and on
tiny random checkpoints: what it decodes, the CLI's errors, the CLI's traces, frames in the corpus
schema, the corpus store, the player widget's state."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest
from PIL import Image

import mudiff_viz as mv
from mudiff_viz.core.trace import check_invariants
from mudiff_viz.corpus.schema import STEPS, TOKENS

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "assets" / "samples" / "courier-short.pdf"


@pytest.fixture(scope="module")
def diffusion():
    """The embedded character pair's diffusion twin on the sample page, several steps per block."""
    return mv.decode("courier-short", threshold=0.999)


def without_timings(obj):
    """A trace's JSON with every time ("*_s") removed: what two identical decodes share."""
    if isinstance(obj, dict):
        return {k: without_timings(v) for k, v in obj.items() if not k.endswith("_s")}
    if isinstance(obj, list):
        return [without_timings(v) for v in obj]
    return obj


def test_import_is_cheap_and_everything_public_is_in_all():
    code = ("import sys, mudiff_viz as mv; heavy = [m for m in ('torch', 'pandas', 'anywidget') if m in sys.modules]; "
            "print(heavy, sorted(mv.__all__))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True).stdout
    assert out.startswith("[] ")  # nothing heavy until a function is used
    for name in ("decode", "compare", "shuffle", "load_trace", "open_store", "models", "Player", "Trace"):
        assert name in mv.__all__ and getattr(mv, name) is not None
    with pytest.raises(AttributeError):
        mv.not_a_function  # noqa: B018


def test_decode_reads_the_page_and_records_every_step(diffusion):
    assert diffusion.decoder == "diffusion" and diffusion.model.name == "nano-char-diffusion"
    assert check_invariants(diffusion) == []
    assert diffusion.params["threshold"] == 0.999
    assert "Dbm/dumb" in diffusion.text and diffusion.metrics["cer"] < 0.02
    assert diffusion.metrics["tokens_per_forward"] > 1  # several tokens per forward: diffusion, not AR


def test_a_page_by_name_path_bytes_or_image(tiny_models):
    model = str(tiny_models["ar"])
    by_name = mv.decode("courier-short.pdf", model=model, decoder="ar")
    by_path = mv.decode(SAMPLE, model=model, decoder="ar")
    by_bytes = mv.decode(SAMPLE.read_bytes(), model=model, decoder="ar")
    assert by_name.text == by_path.text == by_bytes.text
    assert by_name.page.sha256 == by_bytes.page.sha256 and by_bytes.page.source == "upload"
    image = Image.open(ROOT / "assets" / "samples" / "scan-times.jpg")
    scan = mv.decode(image, model=model, decoder="ar", max_new_tokens=8)
    assert scan.regions and all(len(r.tokens) <= 8 for r in scan.regions)
    unrecorded = mv.decode(SAMPLE, model=model, decoder="ar", record=False)
    assert unrecorded.text == by_path.text and unrecorded.steps == []
    assert len(unrecorded.steps_frame()) == 0 and len(unrecorded.tokens_frame()) == unrecorded.n_tokens
    with pytest.raises(mv.UserInputError, match="no such file or bundled sample: nope.*courier-short.pdf"):
        mv.decode("nope")
    with pytest.raises(mv.UserInputError, match="got int"):
        mv.decode(42)


# The CLI's own parser and error handler, in process: the message it prints for a bad knob value
@pytest.mark.parametrize("knob,value", [("threshold", 1.5), ("steps", 0), ("top_p", 0.0), ("temperature", -1.0),
                                        ("max_new_tokens", 0), ("block_length", 2000)])
def test_bad_knobs_raise_the_cli_one_line_errors(knob, value, capsys):
    from mudiff_viz.cli.main import main

    flag = "--" + knob.replace("_", "-")
    assert main(["decode", str(SAMPLE), flag, str(value), "--out", "unused.json"]) == 2
    cli_line = capsys.readouterr().err.strip()
    with pytest.raises(mv.UserInputError) as err:
        mv.decode(SAMPLE, **{knob: value})
    assert cli_line == f"error: {err.value}" and "\n" not in str(err.value)


def test_bad_names_and_probes_are_one_line_errors():
    with pytest.raises(mv.UserInputError, match="unknown knob 'treshold'; knobs are block_length"):
        mv.decode(SAMPLE, treshold=0.9)
    with pytest.raises(mv.UserInputError, match="unknown strategy 'nope'; choose one of low_confidence_dynamic"):
        mv.decode(SAMPLE, strategy="nope")
    with pytest.raises(mv.UserInputError, match="degradation knobs are"):
        mv.decode(SAMPLE, degrade="sharpen=2")
    with pytest.raises(mv.UserInputError, match="blur radius"):
        mv.decode(SAMPLE, degrade={"blur": 50})
    with pytest.raises(mv.ModelLoadError, match="unknown model"):
        mv.decode(SAMPLE, model="nope")


def test_page_numbers_count_from_1(tiny_models, tmp_path):
    """page= counts as the CLI's --page and the app's "PDF page" do; the trace keeps the 0-based index."""
    import pymupdf

    doc = pymupdf.open()
    for k in (1, 2):
        doc.new_page(width=300, height=120).insert_text((20, 40), f"This is page number {k}", fontname="cour", fontsize=11)
    path = tmp_path / "two.pdf"
    doc.save(str(path))
    model = str(tiny_models["ar"])
    first, second = (mv.decode(path, page=k, model=model, decoder="ar", max_new_tokens=4) for k in (1, 2))
    assert (first.page.page_index, second.page.page_index) == (0, 1)
    assert "page number 1" in first.gt_text and "page number 2" in second.gt_text
    assert mv.decode(path, model=model, decoder="ar", max_new_tokens=4).gt_text == first.gt_text  # the default is page 1
    with pytest.raises(mv.UserInputError, match="page numbers start at 1"):
        mv.decode(path, page=0, model=model, decoder="ar")
    with pytest.raises(mv.UserInputError, match="page 3 does not exist: the PDF has 2 pages"):
        mv.decode(path, page=3, model=model, decoder="ar")


def test_mv_decode_and_the_cli_give_the_same_trace(tmp_path):
    """One code path: the CLI (a real subprocess) and mv.decode agree on everything but the clock
    times, probes included."""
    out = tmp_path / "cli.json"
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT))
    args = ["decode", str(SAMPLE), "--threshold", "0.99", "--occlude", "0.1", "--degrade", "blur=1",
            "--probe-seed", "3", "--out", str(out), "--quiet"]
    r = subprocess.run([sys.executable, "-m", "mudiff_viz", *args], capture_output=True, text=True, cwd=ROOT, env=env,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    api = mv.decode(str(SAMPLE), threshold=0.99, occlude=0.1, degrade="blur=1", probe_seed=3)
    cli = mv.load_trace(out)
    assert api.page.occluded and api.page.probes["degrade"]["blur"] == 1
    assert without_timings(api.to_dict()) == without_timings(json.loads(out.read_text()))
    assert without_timings(cli.to_dict()) == without_timings(api.to_dict())


def test_the_apps_decode_is_mv_decode():
    """The Decode tab loads and probes the page itself, then decodes it through mv.decode: its job
    and a notebook's call agree on everything but the clock times, and the live observers fire."""
    from mudiff_viz.probes.apply import ProbeSpec
    from mudiff_viz.ui import jobs
    from mudiff_viz.ui.decode_tab import prepare_page

    page = prepare_page(str(SAMPLE), 1, ProbeSpec(degrade={"blur": 1.0}, seed=3))
    knobs = {"threshold": 0.99, "block_length": 32, "steps": 32, "strategy": "low_confidence_dynamic",
             "anchor_reach": 0}  # a model knob (Knob.needs) takes the same path
    progressed, frames = [], []
    app = jobs.decode_job(page, "nano", "diffusion", knobs, lambda d, t: progressed.append((d, t)),
                          lambda build: frames.append(build()))
    notebook = mv.decode(str(SAMPLE), degrade="blur=1", probe_seed=3, **knobs)
    assert without_timings(app.to_dict()) == without_timings(notebook.to_dict())
    assert app.params["anchor_reach"] == 0
    done = [d for d, _ in progressed[:-1]]
    assert done == list(range(1, len(done) + 1)) and len(done) >= 2  # each block reported as it closes
    assert progressed[-1] == (done[-1], done[-1])  # the page ended early: the bar ends full
    assert frames and frames[-1].n_tokens <= app.n_tokens  # frames of the trace so far
    with pytest.raises(mv.UserInputError, match="threshold"):  # the CLI's message, from the app's path too
        jobs.decode_job(page, "nano", "diffusion", {"threshold": 7.0})


def test_frames_have_the_corpus_columns_and_round_trip_through_parquet(diffusion, tmp_path):
    tokens, steps = diffusion.tokens_frame(), diffusion.steps_frame()
    assert list(tokens.columns) == TOKENS.names
    assert all(tokens[f.name].dtype == pd.ArrowDtype(f.type) for f in TOKENS)
    assert list(steps.columns)[: len(STEPS.names)] == STEPS.names
    assert all(steps[f.name].dtype == pd.ArrowDtype(f.type) for f in STEPS)
    assert len(tokens) == diffusion.n_tokens
    assert len(steps) == sum(len(s.positions) for s in diffusion.steps)
    for frame, name in ((tokens, "tokens"), (steps, "steps")):
        path = tmp_path / f"{name}.parquet"
        frame.to_parquet(path)
        back = pd.read_parquet(path, dtype_backend="pyarrow")
        assert back.equals(frame) and list(back.dtypes) == list(frame.dtypes)
    assert pa.Table.from_pandas(tokens, preserve_index=False).schema.equals(TOKENS)


def test_the_frames_agree_with_each_other(diffusion):
    """Each token is committed by exactly one step row, at the forward its token row names."""
    tokens, steps = diffusion.tokens_frame(), diffusion.steps_frame()
    commits = steps[steps["committed"]]
    joined = tokens.merge(commits, left_on=["region", "index"], right_on=["region", "position"], how="left",
                          suffixes=("", "_step"))
    assert len(joined) == len(tokens)
    assert (joined["commit_forward"] == joined["forward"]).all()
    assert (joined["id"] == joined["candidate_id"]).all()
    per_step = steps.groupby("step")["committed"].sum()
    assert (per_step.to_numpy() == steps.drop_duplicates("step")["n_committed"].to_numpy()).all()
    assert (tokens["correct"].dropna() == 1).mean() > 0.95  # the trained pair reads this page


def test_the_store_opens_as_the_same_frames():
    store = mv.open_store()  # the shipped example store
    pages = store.pages()
    assert len(pages) == 480 and set(pages["decoder"]) == {"ar", "diffusion", "self-speculative", "speculative"}
    speculative = int(pages.index[pages["decoder"] == "self-speculative"][0])
    where = "WHERE run_id = ? AND page_id = ? AND decoder = ?"
    for i in (1, speculative):  # a plain decode, and one whose steps carry drafts and verdicts
        key = store.key(i)
        trace = store.page(i)
        assert trace.decoder == key["decoder"]
        stored_tokens = store.sql(f"SELECT * FROM tokens {where} ORDER BY region, index", list(key.values()))
        assert trace.tokens_frame(**key).equals(stored_tokens)
        stored_steps = store.sql(f"SELECT * FROM steps {where} ORDER BY step", list(key.values()))
        per_step = trace.steps_frame(**key)[STEPS.names].drop_duplicates("step").reset_index(drop=True)
        assert per_step.equals(stored_steps)
    assert stored_steps["n_accepted"].sum() > 0 and stored_tokens["verdict"].notna().any()
    key, trace = store.key(1), store.page(1)
    table = store.table("tokens")
    assert all(table[f.name].dtype == pd.ArrowDtype(f.type) for f in TOKENS)
    with pytest.raises(mv.UserInputError, match="query failed: .*nope"):
        store.sql("SELECT * FROM nope")
    with pytest.raises(mv.UserInputError, match="no table 'nope'"):
        store.table("nope")
    with pytest.raises(mv.UserInputError, match="page 480 is out of range"):
        store.page(480)
    with pytest.raises(mv.UserInputError, match="not a corpus store"):
        mv.open_store(ROOT / "docs")
    with pytest.raises(mv.UserInputError, match="decoded by"):
        trace.tokens_frame(decoder="ar" if trace.decoder == "diffusion" else "diffusion")


def test_compare_and_shuffle_on_tiny_checkpoints(tiny_models):
    d, a = str(tiny_models["diffusion"]), str(tiny_models["ar"])
    comparison = mv.compare(SAMPLE, model=d, ar_model=a, block_length=8, steps=4)
    assert [t.decoder for t in comparison.traces] == ["ar", "diffusion"]
    metrics = comparison.metrics_frame()
    assert list(metrics.columns) == ["AR", "diffusion"] and "tokens per forward" in metrics.index
    assert set(comparison.tokens_frame()["decoder"]) == {"ar", "diffusion"}
    # the draft-and-verify decoders join on the same page: the speculative one verifies with the AR model
    more = mv.compare(SAMPLE, model=d, ar_model=a, also=("self-speculative", "speculative"), max_new_tokens=12)
    assert [t.decoder for t in more.traces] == ["ar", "diffusion", "self-speculative", "speculative"]
    assert more["speculative"].text == more.ar.text and more["speculative"].verifier is not None
    assert list(more.metrics_frame().columns) == ["AR", "diffusion", "self-speculative", "speculative"]
    with pytest.raises(mv.UserInputError, match="decoder must be one of"):
        mv.compare(SAMPLE, model=d, ar_model=a, also=("beam",))
    shuffled = mv.shuffle(SAMPLE, level=1.0, seed=1, model=d, ar_model=a, block_length=8, steps=4)
    assert set(shuffled.traces) == {(dec, col) for dec in ("diffusion", "ar") for col in ("original", "shuffled")}
    assert shuffled.lines_changed > 0
    scores = shuffled.scores_frame()
    assert scores.loc[("ar", "shuffled"), "cer"] >= 0
    with pytest.raises(mv.UserInputError, match="level"):
        mv.shuffle(SAMPLE, level=2.0, model=d, ar_model=a)


def test_models_lists_embedded_pairs_and_configured_checkpoints(tiny_models, monkeypatch, tmp_path):
    monkeypatch.setenv("MUDIFF_MODELS", f"{tiny_models['diffusion']},owner/model,{tmp_path}")
    table = mv.models().set_index("spec")
    assert table.loc["nano", "status"] == "installed" and table.loc["nano", "weights"] == "nano-char"
    assert table.loc[str(tiny_models["diffusion"]), "status"] == "found"
    assert table.loc["owner/model", "status"].startswith("not a local directory")
    assert "no config.json" in table.loc[str(tmp_path), "status"]


def test_load_trace_replays_a_saved_version_1_trace():
    trace = mv.load_trace(ROOT / "assets" / "traces" / "courier-short.ar.json")
    assert trace.decoder == "ar" and len(trace.tokens_frame()) == trace.n_tokens
    with pytest.raises(mv.UserInputError, match="no such trace file"):
        mv.load_trace("missing.json")


def test_the_player_widget_state_and_its_static_fallback(diffusion, tiny_models):
    player = mv.Player(diffusion)
    assert player.payload["kind"] == "mudiff-player" and player.payload["page"]["image"].startswith("data:image/jpeg")
    assert player.frame == diffusion.clock_length and player.n_frames == diffusion.clock_length + 1
    assert "MudiffPlayer.mount" in player._esm and "export default" in player._esm and ".mp-pane" in player._css
    player.frame = 3
    assert player.get_state()["frame"] == 3  # a synced trait
    data, _ = diffusion._repr_mimebundle_()  # displaying a Trace: the widget, with the replay as fallback
    assert "application/vnd.jupyter.widget-view+json" in data
    assert data["text/html"].startswith('<iframe class="mudiff-replay" sandbox="allow-scripts"')
    assert "MudiffPlayer" in data["text/html"] and "<script>" not in data["text/html"]  # escaped inside srcdoc
    d, a = str(tiny_models["diffusion"]), str(tiny_models["ar"])
    comparison = mv.compare(SAMPLE, model=d, ar_model=a, block_length=8, steps=4, max_new_tokens=8)
    assert mv.Player(comparison).payload["mode"] == "compare" and len(mv.Player(comparison).payload["panes"]) == 2
    with pytest.raises(TypeError, match="the player shows a Trace"):
        mv.Player(42)
