"""The Semantic Shuffle tab: its library half (shuffle_pair, views.shuffle) on real decodes by the
random-weight nano twins, and the launched app's /shuffle and /shuffle_bench endpoints."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest

from mudiff_viz.core.trace import Trace, check_invariants
from mudiff_viz.probes.bench import summarize
from mudiff_viz.probes.pairs import GRID, decode_grid, score_grid, shuffle_pages, with_line_truth
from mudiff_viz.views import shuffle as views
from tests.ui_support import ROOT, SAMPLE, launched_app, make_tiny_twins
from tests.ui_support import payload as player_payload

SCAN = ROOT / "assets" / "samples" / "scan-times.jpg"


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Two CPU cores, shared: every decode here runs on one thread."""
    import torch

    torch.set_num_threads(1)


@pytest.fixture(scope="module")
def pages():
    return shuffle_pages(SAMPLE.read_bytes(), 1.0, 0)


@pytest.fixture(scope="module")
def traces(tiny_models, pages):
    from mudiff_viz.decoding.pipeline import make_params

    specs = {d: str(tiny_models[d]) for d in ("diffusion", "ar")}
    params = {d: make_params(block_length=8, steps=8, max_new_tokens=24) for d in specs}
    seen: list[str] = []
    out = decode_grid(pages, specs, params, progress=lambda done, total, what: seen.append(what))
    assert seen and set(seen) == {f"{'AR' if d == 'ar' else 'diffusion'} on the {c} page" for d, c in GRID}
    return out


def words_per_line(text: str) -> list[Counter]:
    return [Counter(line.split()) for line in text.splitlines()]


def test_pages_keep_each_lines_words_and_change_their_order(pages):
    orig, shuf = pages.original.gt_text, pages.shuffled.gt_text
    assert words_per_line(orig) == words_per_line(shuf)
    assert orig != shuf and pages.lines_changed >= 1 and pages.lines_total == len(orig.splitlines())
    assert (pages.original.page.width, pages.original.page.height) == (pages.shuffled.page.width, pages.shuffled.page.height)


def test_level_zero_is_one_page():
    p = shuffle_pages(SAMPLE.read_bytes(), 0.0, 3)
    assert p.shuffled is p.original and p.lines_changed == 0


def test_four_traces_scored_against_their_own_page(traces, pages):
    assert list(traces) == list(GRID)
    for (decoder, column), trace in traces.items():
        assert trace.decoder == decoder and check_invariants(trace) == []
        assert trace.gt_text == pages.page(column).gt_text
    scores = score_grid(traces, pages)
    for key, s in scores.items():
        assert 0 <= s["cer"] and s["confident_error_tokens"] <= s["error_tokens"]
        assert s["gt_chars"] == len(pages.page(key[1]).gt_text)


def test_grid_payload_is_four_panes_on_one_clock(traces):
    payload = views.grid_payload(traces, {"original": "data:image/png;base64,AA", "shuffled": None}, 1.0)
    assert payload["mode"] == "compare" and payload["layout"] == "grid" and len(payload["panes"]) == 4
    assert payload["options"] == {"colourBy": "correct"}
    labels = [p["label"] for p in payload["panes"]]
    assert labels == ["diffusion · original page", "diffusion · shuffled page (level 1)", "AR · original page",
                      "AR · shuffled page (level 1)"]
    assert [p["dash"] for p in payload["panes"]] == [False, True, False, True]
    assert len({p["short"] for p in payload["panes"]}) == 4
    # the page text layer gives every decoded token a right/wrong mark
    assert all(any(c >= 0 for c in p["slots"]["correct"]) for p in payload["panes"])
    json.dumps(payload)  # plain data all the way down


def test_score_table_and_summary(traces, pages):
    scores = score_grid(traces, pages)
    headers, rows = views.score_table(scores, 1.0)
    assert [r[0] for r in rows] == ["diffusion", "AR"] and len(headers) == len(rows[0]) == 6
    o, s = scores[("ar", "original")], scores[("ar", "shuffled")]
    assert rows[1][3] == f"{100 * (s['cer'] - o['cer']):+.2f}"
    md = views.summary_markdown(scores, 1.0, 0, pages.lines_changed, pages.lines_total)
    assert "our reconstruction" in md and f"{pages.lines_changed} of {pages.lines_total} lines" in md
    assert "AR** CER" in md and "diffusion** CER" in md
    assert "no ground truth" in views.summary_markdown({}, 0.5, 1, 0, 3).lower()


def test_confident_share():
    assert views.confident_share(None) is None
    assert views.confident_share({"error_tokens": 0, "confident_error_tokens": 0}) is None
    assert views.confident_share({"error_tokens": 4, "confident_error_tokens": 1}) == 0.25


def test_pane_diffs_rebuild_both_texts(traces, pages):
    gts = {c: pages.page(c).gt_text for c in ("original", "shuffled")}
    for (decoder, column), segs in zip(GRID, views.pane_diffs(traces, gts)):
        hyp = "".join(t for t, lab in segs if lab in (None, "substituted", "extra"))
        ref = "".join(t for t, lab in segs if lab in (None, "expected", "missing"))
        assert hyp == traces[(decoder, column)].text and ref == gts[column]


def test_image_traces_get_the_sidecars_lines(tiny_models):
    """The bundled scan has no text layer: its sidecar's lines become the regions' ground truth."""
    from mudiff_viz.decoding.pipeline import decode_page, make_params
    from mudiff_viz.inputs.pages import load_page

    gt = SCAN.with_suffix(".txt").read_text(encoding="utf-8")
    trace = decode_page(load_page(SCAN), model=str(tiny_models["ar"]), decoder="ar", params=make_params(max_new_tokens=8))
    assert trace.gt_text is None
    lines = [ln for ln in gt.splitlines() if ln.strip()]
    with_gt = with_line_truth(trace, gt)
    if len(lines) != len(trace.regions):
        pytest.skip("the tiny segmenter found a different number of lines")  # then the trace is left alone
    assert with_gt.gt_text is not None and [r.gt_text for r in with_gt.regions] == [" ".join(x.split()) for x in lines]
    assert "cer" in with_gt.metrics and trace.gt_text is None  # the original trace is not modified
    assert with_line_truth(trace, "one line only") is trace


def test_bench_table_from_rows():
    rows = [
        {"page": "a", "level": lv, "seed": 0, "decoder": d, "cer": c, "error_tokens": 4, "confident_error_tokens": k}
        for d, lv, c, k in [("diffusion", 0.0, 0.1, 1), ("diffusion", 1.0, 0.15, 1), ("ar", 0.0, 0.1, 0), ("ar", 1.0, 0.4, 2)]
    ]
    headers, table = views.bench_table(summarize(rows))
    assert headers[:3] == ["decoder", "CER at 0", "CER at 1"]
    assert table[0][:3] == ["diffusion", "10.00%", "15.00%"] and table[0][3].startswith("+5.00")
    assert table[1][0] == "AR" and table[1][3].startswith("+30.00") and table[1][4] == "25.00%"


def test_the_wrong_token_column_says_one_thing_in_one_way():
    """Before: "no errors" for a pane without wrong tokens and "0.00%" for one whose wrong tokens
    were all unsure, in the same column."""
    headers, rows = views.score_table({("diffusion", "original"): {"cer": 0.0, "error_tokens": 0, "confident_error_tokens": 0},
                                       ("diffusion", "shuffled"): {"cer": 0.1, "error_tokens": 3, "confident_error_tokens": 0},
                                       ("ar", "original"): {"cer": 0.1, "error_tokens": 4, "confident_error_tokens": 1}}, 1.0)
    assert rows[0][5] == "no wrong tokens → 0 of 3 (0.00%)"
    assert rows[1][5] == "1 of 4 (25.00%) → –"


def test_the_shuffle_run_streams_its_status_and_finished_panes(tmp_path_factory, pages, monkeypatch):
    """The tab's handler, run as Gradio runs it: a status that names each of the four decodes and
    moves while they run, and the finished panes in the player before the last decode ends."""
    from models import registry
    from mudiff_viz.ui import jobs, shuffle_tab

    monkeypatch.setattr(registry, "NANO_DIR", make_tiny_twins(tmp_path_factory.mktemp("grid-models"), max_answer=48))
    registry._cache.clear()
    real_ticking = jobs.ticking
    monkeypatch.setattr(jobs, "ticking", lambda job, interval_s=1.0: real_ticking(job, 0.005))
    frames, gen = [], shuffle_tab.streamed_grid(pages, "nano", {"block_length": 4, "steps": 4, "max_new_tokens": 48},
                                                lambda *a, **k: None)
    try:
        while True:
            frames.append(dict(zip(shuffle_tab.OUTPUTS, next(gen))))
    except StopIteration as stop:
        traces = stop.value
    registry._cache.clear()
    assert list(traces) == list(GRID)
    statuses = [f["status"] for f in frames]
    assert len(set(statuses)) >= 4  # it moved
    for k in (1, 4):
        assert any(f"Decoding {k} of 4" in s for s in statuses)
    for s in statuses:  # never "decoding k of 4" beside k panes done
        m = re.search(r"Decoding (\d) of 4.* (\d) of 4 panes done", s)
        assert not m or int(m.group(2)) < int(m.group(1)), s
    grids = [f["player"] for f in frames if isinstance(f["player"], dict) and "panes" in f["player"]]
    counts = [len(g["panes"]) for g in grids]
    assert counts and counts == sorted(counts) and counts[0] < 4  # panes played before the fourth was done
    assert all(g.get("layout") != "grid" for g in grids if len(g["panes"]) < 4)


def test_a_change_is_judged_against_its_seed_spread():
    """The verdict claims an effect only when every seed moves CER the same way, and always shows the
    range. The numbers are the subword pair's on courier-short.pdf, level 1, seeds 0 and 1 (diffusion
    10.26% -> 5.80% and -> 17.81%): one seed alone said "shuffling helped"."""
    noisy = views.noise_verdict("diffusion", [0.0580 - 0.1026, 0.1781 - 0.1026])
    assert noisy == ("diffusion: no effect beyond the seed spread (+1.55 points on average, ±6.00: "
                     "-4.46 to +7.55 over 2 seeds)")
    assert views.noise_verdict("ar", [0.01, 0.02, 0.03]) == (
        "AR: shuffling raised CER by +2.00 points on average, on every seed (+1.00 to +3.00 over 3 seeds)")
    assert "lowered" in views.noise_verdict("ar", [-0.01, -0.02])
    assert views.noise_verdict("diffusion", [0.0, 0.0, 0.0]) == "diffusion: no effect: CER unchanged on all 3 seeds"
    assert "one seed, with no spread" in views.noise_verdict("diffusion", [0.05])


def test_further_seeds_decode_only_the_probed_page(tiny_models, pages, traces):
    from mudiff_viz.decoding.pipeline import make_params
    from mudiff_viz.probes.pairs import further_seed_changes

    specs = {d: str(tiny_models[d]) for d in ("diffusion", "ar")}
    params = {d: make_params(block_length=8, steps=8, max_new_tokens=24) for d in specs}
    scores = score_grid(traces, pages)
    more = [(s, shuffle_pages(SAMPLE.read_bytes(), 1.0, s)) for s in (1, 2)]
    seen: list = []
    further = further_seed_changes(more, scores, specs, params, progress=lambda d, t, w: seen.append((d, t, w)))
    assert [d for d, _, _ in seen] == [1, 2, 3, 4] and {t for _, t, _ in seen} == {4}
    assert all("seed" in w for _, _, w in seen)
    for decoder in ("diffusion", "ar"):
        assert sorted(further[decoder]) == [1, 2]
        # each change is that seed's probed page scored against its own ground truth, minus the control
        from mudiff_viz.decoding.pipeline import decode_page
        sp = more[0][1].shuffled
        again = decode_page(sp.page, model=specs[decoder], decoder=decoder, params=params[decoder])
        from mudiff_viz.probes.bench import score_row
        expected = score_row(with_line_truth(again, sp.gt_text), sp.gt_text)["cer"] - scores[(decoder, "original")]["cer"]
        assert further[decoder][1] == pytest.approx(expected)
    changes = views.seed_changes(scores, pages.seed, further)
    assert [len(c) for c in changes.values()] == [3, 3]
    status = views.summary_markdown(scores, pages.level, pages.seed, pages.lines_changed, pages.lines_total,
                                    changes=changes)
    for decoder, label in (("diffusion", "diffusion"), ("ar", "AR")):
        line = next(line for line in status.splitlines() if line.startswith(label + ":"))
        lo, hi = (100 * min(changes[decoder]), 100 * max(changes[decoder]))
        assert (f"{lo:+.2f} to {hi:+.2f} over 3 seeds" in line) or "unchanged on all 3 seeds" in line, line
    one = views.summary_markdown(scores, pages.level, pages.seed, pages.lines_changed, pages.lines_total)
    assert "one page and one seed" in one and "no seed spread" in one


# ---- through the launched app -------------------------------------------------------------------


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    from gradio_client import Client

    with launched_app(make_tiny_twins(tmp_path_factory.mktemp("models"))) as url:
        yield Client(url, verbose=False)


def value(x):
    return x["value"] if isinstance(x, dict) and x.get("__type__") == "update" else x


def test_shuffle_endpoint_returns_four_traces(client):
    from gradio_client import handle_file

    out = client.predict(file=handle_file(str(SAMPLE)), page_number=1, level=0.5, seed=2, spec="nano", block_length=8,
                         steps=8, threshold=0.9, max_new_tokens=24, api_name="/shuffle")
    status, payload, table, *diffs, files = (value(x) for x in out)
    payload = player_payload(payload)  # the app sends it as JSON text
    assert "our reconstruction" in status and "level 0.5, seed 2" in status
    # the default three seeds: every decoder's change beside its seed spread
    for label in ("diffusion", "AR"):
        assert re.search(rf"{label}: (no effect beyond the seed spread .*over 3 seeds|no effect: CER unchanged on all 3 "
                         rf"seeds|shuffling (raised|lowered) CER .*over 3 seeds)", status), status
    assert payload["layout"] == "grid" and len(payload["panes"]) == 4
    assert all(p["page"]["image"].startswith("data:image/jpeg;base64,") for p in payload["panes"])
    assert [r[0] for r in table["data"]] == ["diffusion", "AR"]
    assert len(diffs) == 4 and all(diffs)
    shuffled, *trace_files = files
    assert shuffled.endswith(".shuffled-0.5-seed2.pdf") and Path(shuffled).read_bytes().startswith(b"%PDF")
    traces = [Trace.load(p) for p in trace_files]
    assert [(t.decoder, Path(p).name.split(".")[1]) for t, p in zip(traces, trace_files)] == list(GRID)
    assert all(check_invariants(t) == [] for t in traces)
    d_orig, d_shuf, a_orig, a_shuf = traces
    assert d_orig.page.sha256 == a_orig.page.sha256 != d_shuf.page.sha256 == a_shuf.page.sha256
    assert words_per_line(d_orig.gt_text) == words_per_line(d_shuf.gt_text) and d_orig.gt_text != d_shuf.gt_text
    # the payload's panes are these traces
    assert [p["text"] for p in payload["panes"]] == [t.text for t in traces]


def test_shuffle_bench_endpoint(client):
    out = client.predict(levels=[0.0, 1.0], seeds=1, spec="nano", block_length=8, steps=8, threshold=0.9, max_new_tokens=16,
                         api_name="/shuffle_bench")
    status, fig, table, files = (value(x) for x in out)
    assert "our reconstruction" in status and "diffusion: CER" in status and "ar: CER" in status
    data = json.loads(fig["plot"])["data"]
    assert {t["name"] for t in data if t.get("showlegend") is not False} == {"diffusion", "ar"}
    assert [r[0] for r in table["data"]] == ["diffusion", "AR"]
    names = sorted(Path(f).name for f in files)
    assert names == ["conditions.md", "figure.html", "results.csv", "results.json", "summary.json"]
    rows = json.loads(Path([f for f in files if f.endswith("results.json")][0]).read_text())
    n_pages = len([p for p in (ROOT / "assets" / "samples").iterdir() if p.suffix in (".pdf", ".jpg", ".png")])
    assert len(rows) == n_pages * 2 * 2 and {r["level"] for r in rows} == {0.0, 1.0}


def test_shuffle_needs_a_page(client):
    with pytest.raises(Exception, match="choose a page first"):
        client.predict(file=None, page_number=1, level=0.5, seed=0, spec="nano", block_length=8, steps=8, threshold=0.9,
                       max_new_tokens=24, api_name="/shuffle")


def worker_ends(timeout_s: float = 60) -> bool:
    """Whether the handler's worker thread (jobs.ticking's) ends within ``timeout_s``."""
    import threading
    import time

    deadline = time.monotonic() + timeout_s
    while any(t.name == "mudiff-work" for t in threading.enumerate()):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_leaving_the_shuffle_run_cancels_its_decodes(tmp_path_factory, pages, monkeypatch, caplog):
    """Closing the handler's generator (Gradio does when the tab closes) stops the four decodes at
    their next block: the worker thread ends without finishing them."""
    import logging

    from models import registry
    from mudiff_viz.ui import jobs, shuffle_tab

    monkeypatch.setattr(registry, "NANO_DIR", make_tiny_twins(tmp_path_factory.mktemp("leave-models"), max_answer=512))
    registry._cache.clear()
    real_ticking = jobs.ticking
    monkeypatch.setattr(jobs, "ticking", lambda job, interval_s=1.0: real_ticking(job, 0.005))
    finished: list = []
    real_job = shuffle_tab.shuffle_job
    monkeypatch.setattr(shuffle_tab, "shuffle_job", lambda *a: real_job(*a[:4], lambda k, t: (finished.append(k), a[4](k, t))))
    gen = shuffle_tab.streamed_grid(pages, "nano", {"block_length": 2, "steps": 2, "max_new_tokens": 512}, lambda *a, **k: None)
    with caplog.at_level(logging.INFO, logger="mudiff_viz.ui.jobs"):
        next(gen)
        gen.close()
        assert worker_ends()
    registry._cache.clear()
    assert "work cancelled" in caplog.text and len(finished) < 4


def test_stop_keeps_and_shows_what_the_benchmark_finished(tmp_path_factory, monkeypatch):
    """Stop flags the running benchmark: it ends after the decode in progress and the decodes that
    finished come back as summary, figure, table and downloads, marked partial."""
    from models import registry
    from mudiff_viz.ui import jobs, shuffle_tab

    monkeypatch.setattr(registry, "NANO_DIR", make_tiny_twins(tmp_path_factory.mktemp("partial-models")))
    registry._cache.clear()
    real_ticking = jobs.ticking
    monkeypatch.setattr(jobs, "ticking", lambda job, interval_s=1.0: real_ticking(job, 0.005))
    stop = shuffle_tab.bench_stop()
    decodes: list = []
    real_bench = shuffle_tab.run_shuffle_benchmark
    monkeypatch.setattr(shuffle_tab, "run_shuffle_benchmark", lambda *a, progress, **k: real_bench(
        *a, progress=lambda d, t, m: (decodes.append((d, t)), progress(d, t, m)), **k))
    gen = shuffle_tab.run_shuffle_bench([0.0, 0.5, 1.0], 2, "nano", {"block_length": 8, "steps": 8, "max_new_tokens": 16},
                                        stop, progress=lambda *a, **k: None)
    frames = [next(gen)]
    while len(decodes) < 3:
        frames.append(next(gen))
    assert "stopping" not in frames[-1][0]
    assert shuffle_tab.request_stop(stop).startswith("Stopping the benchmark")
    frames += list(gen)
    registry._cache.clear()
    status, fig, table, files = frames[-1]
    finished, planned = len(decodes), decodes[0][1]
    assert 3 <= finished < planned
    assert f"partial: stopped after {finished} of {planned} decodes" in status
    assert fig["visible"] and table["visible"] and files["visible"]
    assert f"partial: {finished} of {planned} decodes, stopped" in fig["value"].layout.title.text
    rows = json.loads(Path(next(f for f in files["value"] if f.endswith("results.json"))).read_text())
    assert len(rows) == finished and all(r["page"] == rows[0]["page"] for r in rows)  # the first page's decodes
    assert [r[0] for r in table["value"]] == ["diffusion", "AR"]


def test_stopping_the_benchmark_ends_it_after_the_decode_in_progress(tmp_path_factory, monkeypatch, caplog):
    """The benchmark streams a status line while it runs; closing its generator (Stop, or the tab
    closing) ends the worker after the decode in progress, long before the planned decodes."""
    import logging

    from models import registry
    from mudiff_viz.ui import jobs, shuffle_tab

    monkeypatch.setattr(registry, "NANO_DIR", make_tiny_twins(tmp_path_factory.mktemp("stop-models")))
    registry._cache.clear()
    real_ticking = jobs.ticking
    monkeypatch.setattr(jobs, "ticking", lambda job, interval_s=1.0: real_ticking(job, 0.005))
    decodes: list = []
    real_bench = shuffle_tab.run_shuffle_benchmark
    monkeypatch.setattr(shuffle_tab, "run_shuffle_benchmark", lambda *a, progress, **k: real_bench(
        *a, progress=lambda d, t, m: (progress(d, t, m), decodes.append((d, t))), **k))
    gen = shuffle_tab.run_shuffle_bench([0.0, 0.5, 1.0], 2, "nano", {"block_length": 8, "steps": 8, "max_new_tokens": 24},
                                        progress=lambda *a, **k: None)
    with caplog.at_level(logging.INFO, logger="mudiff_viz.ui.jobs"):
        status = next(gen)[0]
        assert status.startswith("Benchmark:") and "Stop" in status
        while not decodes:  # one decode done: the status counts it
            status = next(gen)[0]
        status = next(gen)[0]
        assert f"of {decodes[0][1]} decodes" in status
        gen.close()
        assert worker_ends()
    registry._cache.clear()
    assert "work cancelled" in caplog.text
    assert len(decodes) < decodes[0][1] // 2, (len(decodes), decodes[0][1])
