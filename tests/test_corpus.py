"""Corpus scale (docs/corpus.md): a 20-page corpus on the embedded pair, in-process and on a local Ray
instance, killed and resumed, with hostile pages; aggregates on hand-built traces; the store's
round trip."""

from __future__ import annotations

import json
import math
import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch
from PIL import Image

from mudiff_viz.cli.main import main
from mudiff_viz.core.errors import UserInputError
from mudiff_viz.core.trace import (
    Metrics,
    ModelRecord,
    Occlusion,
    PageRecord,
    RegionRecord,
    StepRecord,
    TokenRecord,
    Trace,
    check_invariants,
)
from mudiff_viz.corpus.grid import ProbeGrid
from mudiff_viz.corpus.intervals import mean_interval, t_quantile
from mudiff_viz.corpus.rows import char_class, page_rows
from mudiff_viz.corpus.runner import run_corpus
from mudiff_viz.corpus.schema import SCHEMAS, TIMING_COLUMNS
from mudiff_viz.corpus.sources import parse_page_range
from mudiff_viz.corpus.stats import corpus_figures, corpus_tables, load_page_trace
from mudiff_viz.corpus.store import TraceStore
from mudiff_viz.decoding.pipeline import decode_page, make_params
from mudiff_viz.inputs import synth
from mudiff_viz.inputs.pages import load_page

ROOT = Path(__file__).resolve().parent.parent
MODEL = "nano-char"
DPI = 100
N_PDF, N_IMAGES = 12, 8  # 20 pages with ground truth, plus two hostile ones


# ---- the corpus --------------------------------------------------------------------------------


def _small_pages(n: int, seed: int) -> list[synth.SynthPage]:
    """One short paragraph per page (a line or two): real pages, quick to decode on 2 cores."""
    rng = random.Random(seed)
    docs = synth.documents("test")
    style = synth.PageStyle(font="helvetica", size=12, columns=1, margin=72, heading=False)
    pages = []
    for _ in range(n):
        words = rng.choice(rng.choice(docs).paragraphs).split()
        start = rng.randrange(max(1, len(words) - 8))
        pages.append(synth.make_page([" ".join(words[start : start + rng.randint(6, 12)])], style))
    return pages


def _cropped_scan(image: Image.Image, margin: int = 24) -> Image.Image:
    """The text area of a rendered page, as a cropped scan (a page this sparse reads as blank whole)."""
    gray = np.asarray(image.convert("L"))
    ys, xs = np.nonzero(gray < 128)
    return image.crop((max(0, xs.min() - margin), max(0, ys.min() - margin), xs.max() + margin, ys.max() + margin))


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> dict:
    import pymupdf

    root = tmp_path_factory.mktemp("corpus")
    book = pymupdf.open()
    for sp in _small_pages(N_PDF + 2, seed=1):  # two more pages than the range asks for
        with pymupdf.open(stream=sp.pdf, filetype="pdf") as one:
            book.insert_pdf(one)
    (root / "book.pdf").write_bytes(book.tobytes(garbage=3, deflate=True))
    scans = root / "scans"
    scans.mkdir()
    for i, sp in enumerate(_small_pages(N_IMAGES, seed=2)):
        _cropped_scan(sp.render(dpi=DPI).image).save(scans / f"scan{i:02d}.png")
        (scans / f"scan{i:02d}.txt").write_text(sp.text + "\n", encoding="utf-8")
    Image.new("RGB", (400, 300), "white").save(scans / "blank.png")  # hostile: no text at all
    (root / "broken.pdf").write_bytes(b"%PDF-1.7\n1 0 obj << /Type /Catalog >>\n% truncated")  # hostile: corrupt
    inputs = [f"{root / 'book.pdf'}:1-{N_PDF}", str(scans), str(root / "broken.pdf")]
    return {"root": root, "inputs": inputs}


def _rows(store: Path, table: str) -> list[dict]:
    return TraceStore(store).read(table).to_pylist()


def _without_times(trace: dict) -> dict:
    """A trace dict without its wall-clock fields (every "*_s" key, at any depth)."""
    if isinstance(trace, dict):
        return {k: _without_times(v) for k, v in trace.items() if not k.endswith("_s")}
    if isinstance(trace, list):
        return [_without_times(v) for v in trace]
    return trace


def _comparable(store: Path, table: str) -> list[dict]:
    """A table's rows, timing columns dropped (and times inside the trace JSON), sorted."""
    out = []
    for row in _rows(store, table):
        row = {k: v for k, v in row.items() if k not in TIMING_COLUMNS[table]}
        if row.get("trace_json"):
            row["trace_json"] = _without_times(json.loads(row["trace_json"]))
        out.append(row)
    return sorted(out, key=lambda r: json.dumps([r["page_id"], r["decoder"], r.get("region"), r.get("index"),
                                                   r.get("step")]))


@pytest.fixture(scope="module")
def killed_and_resumed(corpus) -> dict:
    """A command-line run killed (SIGKILL) once its first chunk is on disk, then resumed in-process."""
    store = corpus["root"] / "store-inprocess"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    cmd = [sys.executable, "-m", "mudiff_viz", "corpus", "run", *corpus["inputs"], "--out", str(store),
           "--model", MODEL, "--dpi", str(DPI), "--chunk-pages", "3"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 240
    while not list(store.glob("pages/*/part-*.parquet")) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    before = _rows(store, "pages")
    # a chunk cut off mid-write: its tokens file landed, its pages file never did
    (run_dir,) = list((store / "tokens").glob("*"))
    orphan = run_dir / "part-00099.parquet"
    orphan.write_bytes(next(run_dir.glob("part-*.parquet")).read_bytes())
    half_written = run_dir / ".part-00100.parquet.tmp"
    half_written.write_bytes(b"PAR1 cut off")
    summary = run_corpus(corpus["inputs"], store, models=MODEL, dpi=DPI, chunk_pages=8)
    return {"store": store, "killed_rc": proc.returncode, "before": before, "summary": summary,
            "leftovers": [orphan, half_written]}


@pytest.fixture(scope="module")
def on_ray(corpus) -> dict:
    store = corpus["root"] / "store-ray"
    summary = run_corpus(corpus["inputs"], store, models=MODEL, dpi=DPI, workers=2, ray_address="local", chunk_pages=8)
    return {"store": store, "summary": summary}


# ---- the runs ----------------------------------------------------------------------------------


def test_a_killed_run_resumes_without_duplicates(corpus, killed_and_resumed):
    r = killed_and_resumed
    assert r["killed_rc"] == -signal.SIGKILL  # it really was killed part-way
    n_before = len(r["before"])
    assert 0 < n_before < 2 * (N_PDF + N_IMAGES + 2)
    s = r["summary"]
    assert s.skipped == n_before and s.decoded == 2 * (N_PDF + N_IMAGES + 2) - n_before
    pages = _rows(r["store"], "pages")
    keys = [(p["page_id"], p["decoder"]) for p in pages]
    assert len(keys) == len(set(keys)) == 2 * (N_PDF + N_IMAGES + 2)
    assert not any(p.exists() for p in r["leftovers"])  # the half-written chunk was cleaned up
    tokens = _rows(r["store"], "tokens")
    token_keys = {(t["page_id"], t["decoder"], t["region"], t["index"]) for t in tokens}
    assert len(token_keys) == len(tokens) == sum(p["tokens"] or 0 for p in pages)
    again = run_corpus(corpus["inputs"], r["store"], models=MODEL, dpi=DPI)
    assert again.decoded == 0 and again.skipped == len(keys)  # a finished run has nothing left to do
    retried = run_corpus(corpus["inputs"], r["store"], models=MODEL, dpi=DPI, retry_failed=True)
    assert (retried.decoded, retried.failed) == (4, 4)  # the two hostile pages, again, in place of their rows
    assert sorted((p["page_id"], p["decoder"]) for p in _rows(r["store"], "pages")) == sorted(keys)


def test_hostile_pages_fail_alone_with_one_line_errors(killed_and_resumed):
    pages = _rows(killed_and_resumed["store"], "pages")
    failed = {(Path(p["source"]).name, p["decoder"]): p["error"] for p in pages if p["status"] == "failed"}
    assert set(failed) == {(name, d) for name in ("blank.png", "broken.pdf") for d in ("diffusion", "ar")}
    assert all(e and "\n" not in e for e in failed.values())
    assert failed[("blank.png", "diffusion")] == "no text found on the page"
    assert "PDF" in failed[("broken.pdf", "ar")]  # MuPDF's verdict: "corrupt PDF: ..." or "PDF has no pages"
    ok = [p for p in pages if p["status"] == "ok"]
    assert len(ok) == 2 * (N_PDF + N_IMAGES)
    assert all(p["trace_json"] and p["cer"] is not None for p in ok)  # every good page has ground truth
    assert sum(p["cer"] for p in ok) / len(ok) < 0.15  # the embedded pair really reads these pages
    assert sorted({p["page_index"] for p in ok if p["source"].endswith("book.pdf")}) == list(range(N_PDF))


def test_in_process_and_ray_give_the_same_rows(killed_and_resumed, on_ray):
    assert on_ray["summary"].workers == 2 and on_ray["summary"].decoded == 2 * (N_PDF + N_IMAGES + 2)
    a, b = killed_and_resumed["store"], on_ray["store"]
    for table in ("pages", "regions", "tokens", "steps"):
        rows_a, rows_b = _comparable(a, table), _comparable(b, table)
        assert len(rows_a) == len(rows_b) > 0, table
        assert rows_a == rows_b, table
    assert [r["run_id"] for r in TraceStore(a).runs()] == [r["run_id"] for r in TraceStore(b).runs()]


def test_the_store_round_trips_a_page_trace(corpus, killed_and_resumed):
    store = killed_and_resumed["store"]
    run_id = killed_and_resumed["summary"].run_id
    book = corpus["root"] / "book.pdf"
    row = next(p for p in _rows(store, "pages") if p["source"] == str(book) and p["page_index"] == 2
               and p["decoder"] == "diffusion")
    trace = load_page_trace(store, run_id, row["page_id"], "diffusion")
    assert check_invariants(trace) == []
    assert json.loads(trace.to_json()) == json.loads(row["trace_json"])  # nothing lost on the way back
    # the same decode, run directly, gives the same trace (times aside)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        page = replace(load_page(book.read_bytes(), page_index=2, dpi=DPI), source=str(book))
        direct = decode_page(page, model=MODEL, decoder="diffusion", params=make_params())
    finally:
        torch.set_num_threads(threads)
    assert _without_times(trace.to_dict()) == _without_times(direct.to_dict())
    # and every row of the other tables joins back to it
    key = (run_id, row["page_id"], "diffusion")
    mine = [t for t in _rows(store, "tokens") if (t["run_id"], t["page_id"], t["decoder"]) == key]
    flat = [tok for region in trace.regions for tok in region.tokens]
    assert [(t["text"], t["commit_forward"], t["confidence"]) for t in mine] == \
        [(t.text, t.commit_forward, t.confidence) for t in flat]
    steps = [s for s in _rows(store, "steps") if (s["run_id"], s["page_id"], s["decoder"]) == key]
    assert [s["forward"] for s in steps] == [s.forward for s in trace.steps]
    with pytest.raises(UserInputError, match="failed"):
        bad = next(p for p in _rows(store, "pages") if p["status"] == "failed")
        load_page_trace(store, run_id, bad["page_id"], bad["decoder"])


def test_stats_command_and_figures_point_at_pages(killed_and_resumed, tmp_path, capsys):
    store = killed_and_resumed["store"]
    assert main(["corpus", "stats", str(store), "--out", str(tmp_path)]) == 0
    report = capsys.readouterr().out
    for heading in ("CER by probe condition", "Confidence calibration", "Lateness by character class",
                    "Commit step against position in block", "Tokens per forward", "Failed pages"):
        assert f"## {heading}" in report
    assert (tmp_path / "figures.html").stat().st_size > 100_000  # offline: plotly.js inlined
    tables = corpus_tables(store)
    assert {r["decoder"] for r in tables["calibration_error"]} == {"diffusion", "ar"}
    assert [r["pages"] for r in tables["cer_by_condition"]] == [N_PDF + N_IMAGES] * 2
    figures = corpus_figures(store, tables=tables)
    points = [tuple(c) for trace in figures["cer_by_level"].data if trace.customdata is not None
              for c in trace.customdata]
    assert len(points) == 2 * (N_PDF + N_IMAGES)
    run_id, page_id, decoder = points[0]
    assert load_page_trace(store, run_id, page_id, decoder).decoder == decoder


def test_bad_inputs_are_one_line_errors(corpus, tmp_path, capsys):
    book = corpus["root"] / "book.pdf"
    cases = [
        ([str(tmp_path / "missing.pdf")], "no such file or folder"),
        ([f"{book}:3-1"], "bad page range"),
        ([f"{book}:{N_PDF + 5}"], f"page {N_PDF + 5} does not exist"),
        ([str(book), "--ray", "127.0.0.1:1"], "cannot reach the Ray cluster"),
    ]
    for args, message in cases:
        assert main(["corpus", "run", *args, "--out", str(tmp_path / "s"), "--model", MODEL]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("error: ") and message in err and "\n" not in err
    assert not (tmp_path / "s" / "runs").exists()  # nothing was written


def test_page_ranges_and_the_probe_grid():
    assert parse_page_range("1-3,7") == [0, 1, 2, 6]
    assert parse_page_range("2") == [1]
    for bad in ("0", "3-1", "a", "1,,2"):
        with pytest.raises(UserInputError):
            parse_page_range(bad)
    grid = ProbeGrid.build(levels=[0, 1], occlusions=[0, 0.1], degradations=["blur=1,dpi=72"], seeds=2)
    variants = grid.variants()
    assert len(variants) == 2 * 2 * 2 * 2 - 1  # the untouched page is decoded once, not once per seed
    assert {v.degrade for v in variants} == {"none", "dpi=72,blur=1"}
    assert ProbeGrid.build(degradations=["dpi=72,blur=1"]).degradations == grid.degradations


# ---- aggregates on hand-built traces -----------------------------------------------------------


def _trace(decoder: str, tokens: list[tuple[str, int, float]], gt: str, steps: list[StepRecord],
           occluded: list[Occlusion] = ()) -> Trace:
    """A one-region trace from (text, commit forward, confidence) tokens; text "" is the stop token."""
    records = [TokenRecord(text=t, id=10 + i, commit_forward=f, commit_time_s=0.01 * f, confidence=c, stop=t == "")
               for i, (t, f, c) in enumerate(tokens)]
    text = "".join(t for t, _, _ in tokens)
    nfe = len(steps)
    params = {"decoder": decoder, "block_length": 4} if decoder == "diffusion" else {"decoder": decoder}
    return Trace(
        decoder=decoder, model=ModelRecord(name="hand", spec="hand", params_m=0.0), params=params,
        page=PageRecord(width=100, height=50, occluded=list(occluded)), text=text,
        metrics=Metrics(nfe=nfe, commit_passes=0, batched_forwards=nfe, tokens=len(tokens), text_chars=len(text),
                        tokens_per_forward=len(tokens) / nfe, wall_s=0.1, prefill_s=0.01, decode_s=0.09,
                        time_to_first_token_s=0.01 * min(f for _, f, _ in tokens)),
        regions=[RegionRecord(bbox=[0, 0, 100, 50], text=text, tokens=records, gt_text=gt)], steps=steps, gt_text=gt,
    )


def _step(forward: int, block: int, positions: list[int], committed: list[int], conf: float = 0.5) -> StepRecord:
    n = len(positions)
    return StepRecord(forward=forward, region=0, block=block, time_s=0.01 * forward, positions=positions,
                      candidates=[1] * n, confidences=[conf] * n, committed=committed, topk=[[[1, conf]]] * n)


def _diffusion_trace() -> Trace:
    """Block length 4. Block 0 ("a1 ,") takes three steps: "a" and " " at the first, "1" at the second,
    "," at the third; block 1 (the stop and three filler positions) takes one. The word "1" is occluded."""
    steps = [_step(0, 0, [0, 1, 2, 3], [1, 0, 1, 0]), _step(1, 0, [1, 3], [1, 0]), _step(2, 0, [3], [1]),
             _step(3, 1, [4, 5, 6, 7], [1, 1, 1, 1])]
    tokens = [("a", 0, 0.95), ("1", 1, 0.85), (" ", 0, 0.91), (",", 2, 0.93), ("", 3, 0.99)]
    return _trace("diffusion", tokens, "a1 .", steps, [Occlusion(box=[0, 0, 5, 5], text="1", region=0, start=1, end=2)])


def _ar_trace() -> Trace:
    steps = [_step(0, 0, [0], [1]), _step(1, 0, [1], [1]), _step(2, 0, [2], [1])]
    return _trace("ar", [("x", 0, 0.6), ("y", 1, 0.65), ("", 2, 0.97)], "xz", steps)


def _base(page: str, decoder: str, level: float = 0.0, seed: int = 0) -> dict:
    return {"run_id": "00000000000000aa", "page_id": f"{page}/L{level}/S{seed}", "decoder": decoder, "source": page,
            "source_sha256": page, "page_index": 0, "level": level, "occlusion": 0.0, "degrade": "none",
            "seed": seed, "variant": f"L{level}/S{seed}", "model": "hand"}


def _hand_store(path: Path, rows: list[dict]) -> Path:
    store = TraceStore(path)
    with store.writing():
        store.write_run({"run_id": "00000000000000aa", "created": "2026-01-01T00:00:00+00:00", "settings_json": "{}",
                         "models_json": "{}", "decoders": ["diffusion", "ar"]})
        merged: dict = {}
        for r in rows:
            for table, items in r.items():
                merged.setdefault(table, []).extend(items)
        store.write_chunk("00000000000000aa", merged)
    return path


def test_hand_built_traces_pass_their_own_checks():
    for trace in (_diffusion_trace(), _ar_trace()):
        assert check_invariants(trace) == []
        assert Trace.loads(trace.to_json()).to_dict() == trace.to_dict()


def test_calibration_bins_and_ece_by_hand(tmp_path):
    path = _hand_store(tmp_path / "s", [page_rows(_base("p", "diffusion"), _diffusion_trace(), "a1 ."),
                                        page_rows(_base("p", "ar"), _ar_trace(), "xz")])
    tables = corpus_tables(path)
    bins = {(b["decoder"], b["bin"]): b for b in tables["calibration_bins"]}
    # diffusion: "a" .95 right, " " .91 right, "," .93 wrong (gt "."), "1" .85 right; the stop has no verdict
    assert set(bins) == {("diffusion", 9), ("diffusion", 8), ("ar", 6)}
    assert bins["diffusion", 9]["tokens"] == 3
    assert bins["diffusion", 9]["mean_confidence"] == pytest.approx((0.95 + 0.91 + 0.93) / 3)
    assert bins["diffusion", 9]["accuracy"] == pytest.approx(2 / 3)
    assert (bins["diffusion", 8]["tokens"], bins["diffusion", 8]["accuracy"]) == (1, 1.0)
    # ar: "x" .6 right, "y" .65 wrong (gt "z")
    assert bins["ar", 6]["accuracy"] == pytest.approx(0.5) and bins["ar", 6]["mean_confidence"] == pytest.approx(0.625)
    ece = {e["decoder"]: e["ece"] for e in tables["calibration_error"]}
    assert ece["diffusion"] == pytest.approx(3 / 4 * abs(2 / 3 - 0.93) + 1 / 4 * abs(1 - 0.85))
    assert ece["ar"] == pytest.approx(abs(0.5 - 0.625))


def test_lateness_by_hand(tmp_path):
    path = _hand_store(tmp_path / "s", [page_rows(_base("p", "diffusion"), _diffusion_trace(), "a1 ."),
                                        page_rows(_base("p", "ar"), _ar_trace(), "xz")])
    tables = corpus_tables(path)
    assert {r["decoder"] for r in tables["step_by_position"]} == {"diffusion"}  # AR has no blocks
    # block 0 took 3 steps, so lateness = (step - 1) / 2; block 1 took one step: lateness 0
    by_class = {r["char_class"]: r for r in tables["lateness_by_class"]}
    summary = {c: (r["tokens"], r["mean_step"], r["mean_lateness"], r["last_step_share"]) for c, r in by_class.items()}
    assert summary == {
        "letter": (1, 1.0, 0.0, 0.0), "digit": (1, 2.0, 0.5, 0.0), "space": (1, 1.0, 0.0, 0.0),
        "punctuation": (1, 3.0, 1.0, 1.0)}  # the stop token has no class
    by_pos = {r["pos_in_block"]: (r["tokens"], r["mean_step"]) for r in tables["step_by_position"]}
    assert by_pos == {0: (2, 1.0), 1: (1, 2.0), 2: (1, 1.0), 3: (1, 3.0)}  # position 0: "a" and the stop
    # distances to the occluded "1" (token 1): "a" 1, " " 1, "," 2, the stop 3
    by_distance = {r["distance"]: (r["tokens"], r["mean_lateness"]) for r in tables["lateness_by_distance"]}
    assert by_distance == {"occluded": (1, 0.5), "1": (2, 0.0), "2": (1, 1.0), "3-5": (1, 0.0)}
    assert [r["distance"] for r in tables["lateness_by_distance"]] == ["occluded", "1", "2", "3-5"]
    tpf = {r["decoder"]: r["mean"] for r in tables["tokens_per_forward"]}
    assert tpf == {"diffusion": pytest.approx(5 / 4), "ar": pytest.approx(1.0)}


def test_cer_intervals_by_hand(tmp_path):
    trace = _diffusion_trace()  # text "a1 ,": CER 0, .25, .5, .75 against these ground truths
    gts = {0.0: "a1 ,", 0.25: "a1 .", 0.5: "a2 .", 0.75: "b2 ."}
    cers = {"p1": (0.25, 0.5), "p2": (0.0, 0.25), "p3": (0.5, 0.75)}  # (seed 0, seed 1) at level 1
    rows = [page_rows(_base(p, "diffusion", 1.0, s), trace, gts[c]) for p, pair in cers.items()
            for s, c in enumerate(pair)]
    rows.append(page_rows(_base("p1", "diffusion", 0.0, 0), trace, gts[0.25]))
    tables = corpus_tables(_hand_store(tmp_path / "s", rows))
    by_level = {r["level"]: r for r in tables["cer_by_condition"]}
    one = by_level[1.0]
    page_means = [0.375, 0.125, 0.625]  # each page's mean over its two seeds
    half = 4.302652729749464 * 0.25 / math.sqrt(3)  # t(0.975, 2 df) * sd / sqrt(n); sd of the means = 0.25
    assert (one["pages"], one["seeds"]) == (3, 2)
    assert one["mean_cer"] == pytest.approx(sum(page_means) / 3)
    assert one["ci_low"] == pytest.approx(0.375 - half) and one["ci_high"] == pytest.approx(0.375 + half)
    assert (one["seed_min"], one["seed_max"]) == (pytest.approx(0.25), pytest.approx(0.5))  # seed means over pages
    zero = by_level[0.0]
    assert (zero["pages"], zero["mean_cer"], zero["ci_low"], zero["ci_high"]) == (1, 0.25, None, None)


def test_t_interval_matches_the_tables():
    for df, value in ((1, 12.7062), (2, 4.3027), (3, 3.1824), (5, 2.5706), (10, 2.2281), (30, 2.0423)):
        assert t_quantile(0.975, df) == pytest.approx(value, abs=1e-4)
    m, lo, hi = mean_interval([0.1, 0.2, 0.3, 0.4])
    assert (m, lo, hi) == (pytest.approx(0.25), pytest.approx(0.0445740), pytest.approx(0.4554260))


def test_char_classes():
    assert [char_class(t) for t in ("a", "Z", "7", " ", "\n", ",", "$", "ab", "a,", "")] == [
        "letter", "letter", "digit", "space", "newline", "punctuation", "punctuation", "letter", "mixed", "other"]


def test_every_part_file_has_its_table_schema(killed_and_resumed):
    store = killed_and_resumed["store"]
    for table in ("pages", "regions", "tokens", "steps"):
        for part in TraceStore(store).parts(table):
            assert pq.read_schema(part).remove_metadata() == SCHEMAS[table]
