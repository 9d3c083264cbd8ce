"""Occlusion and degradation probes, and the order analysis they feed (docs/probes.md)."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
from PIL import Image

from mudiff_viz.core.errors import UserInputError
from mudiff_viz.core.order import order_summary, recovery, token_orders
from mudiff_viz.core.trace import ModelRecord, Occlusion, PageRecord, RegionRecord, StepRecord, TokenRecord, Trace
from mudiff_viz.decoding.build import run_metrics
from mudiff_viz.inputs import synth
from mudiff_viz.inputs.pages import load_page
from mudiff_viz.probes.perturb import degrade, occlude, occlude_pdf, page_words, parse_degrade, word_at


@pytest.fixture(scope="module")
def synth_pdf() -> bytes:
    style = synth.PageStyle(font="helvetica", size=12, columns=1, margin=72, heading=False)
    return synth.random_page(random.Random(11), "test", style=style).pdf


@pytest.fixture(scope="module")
def page(synth_pdf):
    return load_page(synth_pdf, dpi=120)


def _gray(image: Image.Image) -> np.ndarray:
    return np.asarray(image.convert("L")).astype(int)


def test_occlusion_blanks_exactly_the_chosen_word_boxes(page):
    words = page_words(page)
    out = occlude(page, words=[0, 5, 17])
    before, after = _gray(page.image), _gray(out.page.image)
    assert len(out.page.occluded) == 3 and [t for _, t in out.page.occluded] == [words[i].text for i in (0, 5, 17)]
    inside = np.zeros(before.shape, dtype=bool)
    for (x0, y0, x1, y1), _ in out.page.occluded:
        inside[int(y0) : int(y1), int(x0) : int(x1)] = True
        assert (after[int(y0) : int(y1), int(x0) : int(x1)] >= 250).all()  # paper only
        assert (before[int(y0) : int(y1), int(x0) : int(x1)] < 128).any()  # there was ink
    assert np.array_equal(before[~inside], after[~inside])  # nothing else moved
    assert out.page.text == page.text  # the ground truth keeps the words
    assert out.page.probes["occlude"]["words"] == [0, 5, 17]


def test_occlusion_by_fraction_is_seeded_and_checked(page):
    n = len(page_words(page))
    a, b, c = occlude(page, fraction=0.2, seed=1), occlude(page, fraction=0.2, seed=1), occlude(page, fraction=0.2, seed=2)
    assert a.changes["words"] == b.changes["words"] != c.changes["words"]
    assert len(a.changes["words"]) == round(0.2 * n)
    assert occlude(page, fraction=0.0).page.occluded == []
    with pytest.raises(UserInputError, match="fraction must be in"):
        occlude(page, fraction=1.5)
    with pytest.raises(UserInputError, match="does not exist"):
        occlude(page, words=[n + 3])
    with pytest.raises(UserInputError, match="either word indices or a fraction"):
        occlude(page)


def test_a_click_finds_the_word_under_it(page):
    words = page_words(page)
    x0, y0, x1, y1 = words[7].box
    assert word_at(page, (x0 + x1) / 2, (y0 + y1) / 2) == 7
    assert word_at(page, 2, 2) is None


def test_pdf_redaction_removes_the_words_but_the_ground_truth_keeps_them(synth_pdf, page):
    out = occlude_pdf(synth_pdf, words=[2, 9], dpi=120)  # uploads: redaction runs in the isolated worker
    gray = _gray(out.page.image)
    for (x0, y0, x1, y1), text in out.page.occluded:
        assert text and (gray[int(y0) + 1 : int(y1) - 1, int(x0) + 1 : int(x1) - 1] >= 240).all()
    assert out.page.text == page.text and out.changes["kind"] == "pdf-redaction"
    assert (gray < 128).sum() > 0.9 * (_gray(page.image) < 128).sum()  # the rest of the page is still there


def _hf_energy(image: Image.Image) -> float:
    g = _gray(image).astype(float)
    return float(np.abs(np.diff(g, axis=1)).mean() + np.abs(np.diff(g, axis=0)).mean())


def test_degradation_is_deterministic_and_each_knob_acts(page):
    a = degrade(page, noise=20, seed=3).page.image
    assert np.array_equal(np.asarray(a), np.asarray(degrade(page, noise=20, seed=3).page.image))
    assert not np.array_equal(np.asarray(a), np.asarray(degrade(page, noise=20, seed=4).page.image))
    assert _hf_energy(degrade(page, blur=1.5).page.image) < _hf_energy(page.image)  # blur: less high frequency
    paper = _gray(page.image)[:30, :30]
    assert paper.std() < 1 and _gray(a)[:30, :30].std() > 10  # noise shows on blank paper
    jpeg = degrade(page, jpeg=10).page.image
    assert not np.array_equal(np.asarray(jpeg), np.asarray(page.image.convert("RGB")))
    rotated = degrade(page, rotate=3).page
    assert rotated.image.size == page.image.size and rotated.lines[5].bbox != page.lines[5].bbox


def test_lower_dpi_scales_the_page_and_its_boxes_together(page):
    out = degrade(page, dpi=60).page
    assert out.width == round(page.width / 2) and out.dpi == 60
    for a, b in zip(page.lines, out.lines):
        assert np.allclose(np.asarray(b.bbox), np.asarray(a.bbox) / 2, atol=0.01)
    assert out.text == page.text


@pytest.mark.parametrize("kwargs, message", [
    ({"dpi": 500}, "degraded DPI must be in"), ({"blur": -1}, "blur radius"), ({"noise": 1000}, "noise must be"),
    ({"jpeg": 0}, "JPEG quality"), ({"rotate": 45}, "rotation must be"),
])
def test_bad_degradation_knobs_get_one_line(page, kwargs, message):
    with pytest.raises(UserInputError, match=message) as err:
        degrade(page, **kwargs)
    assert "\n" not in str(err.value)


def test_degrade_spec_parsing():
    assert parse_degrade("dpi=72, blur=1") == {"dpi": 72.0, "blur": 1.0}
    with pytest.raises(UserInputError, match="knobs are"):
        parse_degrade("sharpen=2")
    with pytest.raises(UserInputError, match="must be a number"):
        parse_degrade("blur=lots")


# ---- order analysis on hand-built traces ---------------------------------------------------------


def _trace(tokens: list[tuple[str, int]], gt: str, steps_of_block: dict[int, list[int]], occluded: list[Occlusion],
           block_length: int = 4) -> Trace:
    """One region; ``tokens`` are (text, commit forward); ``steps_of_block`` lists each block's forwards."""
    toks = [TokenRecord(text=t, id=i, commit_forward=f, commit_time_s=0.0, confidence=0.5 + 0.01 * i)
            for i, (t, f) in enumerate(tokens)]
    steps = []
    for b, forwards in steps_of_block.items():
        for f in forwards:
            pos = [i for i in range(b * block_length, min(len(toks), (b + 1) * block_length)) if toks[i].commit_forward >= f]
            steps.append(StepRecord(forward=f, region=0, block=b, time_s=0.0, positions=pos, candidates=[0] * len(pos),
                                    confidences=[0.5] * len(pos), committed=[int(toks[i].commit_forward == f) for i in pos],
                                    topk=[[[0, 0.5]]] * len(pos)))
    region = RegionRecord(bbox=[0, 0, 1, 1], text="".join(t for t, _ in tokens), tokens=toks, gt_text=gt)
    return Trace(decoder="diffusion", model=ModelRecord("m", "m", 0.0, mask_id=9), params={"block_length": block_length},
                 page=PageRecord(10, 10, occluded=occluded), text=region.text,
                 metrics=run_metrics([region], len(steps), 0, len(steps), 0.1, 0.0, region.text, gt), regions=[region], steps=steps,
                 gt_text=gt)


def test_order_statistics_on_a_hand_built_trace():
    # "the cat sat on": tokens "the"," cat"," sat"," on" in one block of 4; " cat" (chars 3..7) occluded
    tokens = [("the", 0), (" cat", 2), (" sat", 0), (" on", 1)]
    trace = _trace(tokens, "the cat sat on", {0: [0, 1, 2]}, [Occlusion([0, 0, 1, 1], "cat", region=0, start=4, end=7)])
    rows = token_orders(trace)
    assert [(o.pos_in_block, o.step, o.block_steps, o.occluded, o.distance) for o in rows] == [
        (0, 1, 3, False, 1), (1, 3, 3, True, 0), (2, 1, 3, False, 1), (3, 2, 3, False, 2)]
    s = order_summary([trace])
    assert s["occluded_last_step_share"] == 1.0 and s["other_last_step_share"] == 0.0
    assert s["first_step_share"] == 0.5 and s["mean_step_by_position"] == [1.0, 3.0, 1.0, 2.0]
    assert s["step_by_distance_to_occlusion"]["occluded"] == {"mean_step": 3.0, "tokens": 1}
    assert s["step_by_distance_to_occlusion"]["1"] == {"mean_step": 1.0, "tokens": 2}
    assert s["recovery_rate"] == 1.0 and s["cer_rest"] == 0.0


def test_recovery_counts_words_and_keeps_other_errors_apart():
    occ = [Occlusion([0, 0, 1, 1], "cat", region=0, start=4, end=7), Occlusion([0, 0, 1, 1], "on", region=0, start=12, end=14)]
    # the decoder wrote "cot" for the hidden "cat", got "on" right, and misspelt "sat" (visible) as "sit"
    trace = _trace([("the", 0), (" cot", 1), (" sit", 0), (" on", 0)], "the cat sat on", {0: [0, 1]}, occ)
    r = recovery(trace)
    assert r["occluded_words"] == 2 and r["recovered_words"] == 1 and r["recovery_rate"] == 0.5
    assert r["cer_rest"] == pytest.approx(1 / 9)  # one edit among the 9 characters not occluded


def test_occluded_words_are_located_in_the_trace(synth_pdf, tmp_path):
    """A decode of an occluded page records where each hidden word sits in its region's ground truth."""
    from mudiff_viz.decoding.pipeline import decode_page
    from mudiff_viz.decoding.settings import DecodeParams

    page = load_page(synth_pdf, dpi=150)
    out = occlude(page, words=[3, 20])
    trace = decode_page(out.page, model="nano-char", decoder="diffusion", params=DecodeParams(max_new_tokens=320))
    located = [o for o in trace.page.occluded if o.region is not None]
    assert len(located) == 2
    for o in located:
        assert trace.regions[o.region].gt_text[o.start : o.end] == o.text
    back = Trace.loads(trace.to_json())
    assert back.page.occluded == trace.page.occluded and back.page.probes["occlude"]["words"] == [3, 20]
    assert json.loads(trace.to_json())["page"]["probes"]["occlude"]["seed"] == 0


def test_a_perturbed_sample_replays_on_the_same_pixels():
    """Probes are deterministic given their record, so a saved trace finds its perturbed page again."""
    from mudiff_viz.decoding.build import page_record
    from mudiff_viz.probes.replay import SAMPLES, page_for_trace

    page = load_page(SAMPLES / "courier-short.pdf", dpi=150)
    perturbed = degrade(occlude(page, fraction=0.2, seed=4).page, dpi=100, blur=0.7, noise=5, seed=2).page
    record = page_record(perturbed)
    again = page_for_trace(record)
    assert again is not None and np.array_equal(np.asarray(again), np.asarray(perturbed.image))


def test_benchmark_grid_reports_recovery_apart_from_cer(tmp_path, capsys):
    """shuffle-bench over levels x occlusion x degradation: a row per cell and decoder; occlusion
    rows carry recovery and CER on the rest; the grid summary has seed ranges."""
    import torch

    from mudiff_viz.cli.main import main

    torch.set_num_threads(1)
    doc = synth.documents("test")[7]
    src = tmp_path / "page.pdf"
    src.write_bytes(synth.make_page(doc.paragraphs[:1], synth.PageStyle(font="courier", size=12)).pdf)
    out = tmp_path / "bench"
    code = main(["shuffle-bench", str(src), "--levels", "0,1", "--occlude", "0,0.2", "--degrade", "dpi=100",
                 "--seeds", "2", "--model", "nano-char", "--out", str(out)])
    assert code == 0
    rows = json.loads((out / "results.json").read_text())
    cells = {(r["decoder"], r["level"], r["occlusion"], r["degrade"]) for r in rows}
    assert len(cells) == 2 * 2 * 2 * 2 and len(rows) == 2 * len(cells)
    for r in rows:
        if r["occlusion"]:
            assert r["occluded_words"] > 0 and 0 <= r["recovery_rate"] <= 1 and r["cer_rest"] is not None
        else:
            assert r["occluded_words"] is None
    summary = json.loads((out / "summary.json").read_text())
    grid = summary["conditions"]
    assert len(grid) == len(cells) and all(len(c["cer_seed_range"]) == 2 for c in grid)
    assert "occluded words recovered" in (out / "conditions.md").read_text()
    assert "| diffusion | 1 | 0.2 | dpi=100 |" in capsys.readouterr().out


def test_decode_cli_occludes_and_degrades(tmp_path):
    from mudiff_viz.cli.main import main
    from mudiff_viz.core.trace import Trace
    from mudiff_viz.probes.replay import SAMPLES

    out = tmp_path / "t.json"
    code = main(["decode", str(SAMPLES / "courier-short.pdf"), "--model", "nano-char", "--occlude-words", "0,4",
                 "--degrade", "dpi=100,noise=4", "--probe-seed", "3", "--out", str(out), "--quiet"])
    assert code == 0
    trace = Trace.load(out)
    assert [o.region is not None for o in trace.page.occluded] == [True, True]
    assert trace.page.probes["occlude"]["kind"] == "pdf-redaction" and trace.page.probes["degrade"]["dpi"] == 100
    assert main(["decode", str(SAMPLES / "courier-short.pdf"), "--occlude", "2", "--out", str(out)]) == 2
