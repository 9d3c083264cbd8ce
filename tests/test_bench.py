"""The benchmark harness pieces on random-weight nano twins: structure and switches, never timings."""

from __future__ import annotations

import contextlib
import io
import json

import pytest

from mudiff_viz.bench.speed import bench_pages, run_sweep, sweep_table
from mudiff_viz.cli.main import main as cli_main


def test_ratio_spread_over_pages_and_passes():
    from mudiff_viz.bench.speed import ratio_stats

    rows = [{"a": {"t": [2.0, 2.2]}, "b": {"t": [1.0, 1.0]}}, {"a": {"t": [4.0, 4.0]}, "b": {"t": [1.0, 1.0]}}]
    s = ratio_stats(rows, ("a", "t"), ("b", "t"))
    assert s["value"] == (2.1 + 4.0) / 2  # sums of per-page medians
    assert s["interval"] == [2.1, 4.0]  # resampling pages: both from page 1 .. both from page 2
    assert s["repeat_range"] == [3.0, 3.1]


def test_recording_switch_really_disables_recording(tiny_models):
    from mudiff_viz.bench.speed import _decode
    from mudiff_viz.decoding.settings import DecodeParams

    page = bench_pages(1)[0]
    spec = str(tiny_models["diffusion"])
    on = _decode(page, spec, "diffusion", DecodeParams(block_length=8, steps=8))
    off = _decode(page, spec, "diffusion", DecodeParams(block_length=8, steps=8, record=False))
    assert on.steps and not off.steps
    assert on.text == off.text and on.metrics["nfe"] == off.metrics["nfe"]
    assert len(off.to_json()) < len(on.to_json()) / 2


def test_sweep_grid_has_one_point_per_setting(tiny_models):
    sweep = run_sweep(str(tiny_models["diffusion"]), str(tiny_models["ar"]), n_pages=1, thresholds=(0.5, 0.9),
                      block_lengths=(8, 16), log=lambda m: None)
    settings = [(p["block_length"], p["threshold"]) for p in sweep["points"]]
    assert sorted(settings) == [(8, 0.5), (8, 0.9), (16, 0.5), (16, 0.9)]
    assert sweep["ar"]["tokens_per_forward"] == 1.0
    table = sweep_table(sweep)
    assert table.count("\n") == 2 + 1 + 4


def test_draft_sweep_grid_is_checked_against_the_references(tiny_models):
    from mudiff_viz.bench.speed import draft_sweep_table, run_draft_sweep
    from mudiff_viz.decoding.settings import DecodeParams

    sweep = run_draft_sweep(str(tiny_models["diffusion"]), str(tiny_models["ar"]), n_pages=1, draft_lengths=(2,),
                            branches=("masks", "runner-up"), floors=(0.0, 0.5), params=DecodeParams(max_new_tokens=12),
                            log=lambda m: None)
    grid = [(p["decoder"], p.get("draft_branches"), p.get("draft_floor")) for p in sweep["points"]]
    assert grid == [("self-speculative", "masks", 0.0), ("self-speculative", "masks", 0.5),
                    ("self-speculative", "runner-up", 0.0), ("self-speculative", "runner-up", 0.5),
                    ("speculative", None, None)]
    assert all(p["equal_to_reference"] for p in sweep["points"])  # every variant is exact
    assert draft_sweep_table(sweep).count("\n") == 2 + 2 + 5


def test_draft_sweep_refuses_an_unknown_branch_kind(capsys):
    assert cli_main(["sweep", "--draft-lengths", "2", "--branches", "sideways"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: unknown draft branches 'sideways'") and "\n" not in err


@pytest.fixture(scope="module")
def quick_bench(tiny_models, tmp_path_factory):
    """One ``bench --quick`` through the CLI, its size shrunk to one page and one timed pass (the
    structure is what is tested, never the timings): the JSON it wrote and what it printed."""
    from mudiff_viz.bench import speed

    out = tmp_path_factory.mktemp("bench") / "bench.json"
    printed = io.StringIO()
    with pytest.MonkeyPatch.context() as mp, contextlib.redirect_stdout(printed):
        mp.setitem(speed.QUICK, "n_pages", 1)
        mp.setitem(speed.QUICK, "repeats", 1)
        code = cli_main(["bench", "--quick", "--model", str(tiny_models["diffusion"]), "--ar-model",
                         str(tiny_models["ar"]), "--threads", "1", "--max-new-tokens", "24", "--out", str(out)])
    return {"code": code, "result": json.loads(out.read_text()), "printed": printed.getvalue()}


def test_bench_reports_every_key_in_both_regimes(quick_bench):
    result = quick_bench["result"]
    for key in ("tokens_per_forward", "speedup_vs_ar", "recording_overhead", "trace_bytes_per_token", "peak_rss_mb"):
        assert key in result
    assert result["tokens_per_forward"]["ar"] == 1.0
    assert result["tokens_per_forward"]["diffusion"] > 0
    assert set(result["regimes"]) == {"page_batch", "one_region_at_a_time"}
    batch, single = result["regimes"]["page_batch"], result["regimes"]["one_region_at_a_time"]
    assert batch["per_page"][0]["regions"] == single["per_page"][0]["regions"] > 5
    # the regimes decode the same lines to the same text (batching changes speed, not results)
    assert batch["per_page"][0]["diffusion"]["tokens"] == single["per_page"][0]["diffusion"]["tokens"]
    assert result["trace_bytes_per_token"] > 0 and result["recording_overhead"] > 0
    for stats in result["spreads"].values():  # every ratio with its spread
        lo, hi = stats["interval"]
        assert lo <= stats["value"] <= hi and stats["repeat_range"][0] <= stats["repeat_range"][1]
    assert result["first_frame"]["max_after_prefill_s"] >= 0
    # the draft-and-verify decoders: timed in both regimes, exact where they promise it, counted honestly
    assert result["decoders"] == ["diffusion", "ar", "self-speculative", "speculative"]
    assert result["tokens_equal_ar"]["speculative"] is True and result["tokens_equal_ar"]["ar"] is True
    for d in ("self-speculative", "speculative"):
        entry = single["decoders"][d]
        # every forward of both models counts: random twins reject most drafts, so this may be below 1
        assert 0.0 < entry["tokens_per_forward"] <= entry["tokens_per_verify_forward"] and entry["tokens_per_verify_forward"] >= 1.0
        assert 0.0 <= entry["acceptance"] <= 1.0
        assert f"{d.replace('-', '_')}_speedup_vs_ar_page_batch" in result["spreads"]
    assert "self_speculative_recording_overhead_one_region" in result["spreads"]
    # the recorder's own time, inside the recorded runs: a share of the wall time, for every decoder
    for regime, shares in result["recording_share"].items():
        assert set(shares) == set(result["decoders"]) and all(0.0 < v < 1.0 for v in shares.values()), (regime, shares)
    assert "recording's share of the wall time (page_batch)" in quick_bench["printed"]


def test_bench_cli_quick_writes_json(quick_bench):
    """``--quick`` runs the QUICK size, writes the JSON and prints every ratio with its spread."""
    assert quick_bench["code"] == 0
    assert quick_bench["result"]["pages"] == 1 and quick_bench["result"]["repeats"] == 1
    assert "speedup_vs_ar_page_batch:" in quick_bench["printed"]


@pytest.fixture
def prefix(tiny_models, tmp_path):
    """A candidate pair not installed: the tiny twins copied to P-ar and P-diffusion; P."""
    import shutil

    prefix = tmp_path / "cand"
    for kind in ("ar", "diffusion"):
        shutil.copytree(tiny_models[kind], f"{prefix}-{kind}")
    return prefix


def test_evaluate_runs_a_candidate_pair_from_a_path_prefix(prefix):
    """``--pair P`` with directories P-ar and P-diffusion evaluates that pair, each decoder on its twin."""
    from mudiff_viz.decoding.settings import DecodeParams
    from nano_training.evaluate import eval_pages, run, twin_spec

    assert twin_spec(str(prefix), "ar") == f"{prefix}-ar" and twin_spec("nano", "ar") == "nano"
    rows = run(str(prefix), eval_pages(1, fonts=("courier",)), thresholds=(0.95,), log=lambda _: None)
    assert [r["setting"] for r in rows] == ["ar", "diffusion@0.95"]
    assert all(r["nfe"] > 0 and r["chars"] > 0 for r in rows)
    # the frontier-only reading of the same weights: one token per forward, the AR twin skipped
    ltr = run(str(prefix), eval_pages(1, fonts=("courier",)), thresholds=(0.95,), log=lambda _: None,
              params=DecodeParams(strategy="left_to_right"), with_ar=False)
    assert [r["setting"] for r in ltr] == ["diffusion@0.95/left_to_right"]
    assert 0 < ltr[0]["tokens"] <= ltr[0]["nfe"]  # one token per denoising step, at most


def test_evaluate_cli_writes_its_report_and_rejects_bad_thresholds(prefix, tmp_path):
    from nano_training.evaluate import main

    with pytest.raises(SystemExit) as err:
        main(["--pair", str(prefix), "--thresholds", "0.9,high", "--out", str(tmp_path / "x.json")])
    assert err.value.code == 2 and not (tmp_path / "x.json").exists()
    out = tmp_path / "ltr.json"
    main(["--pair", str(prefix), "--pages-per-font", "1", "--thresholds", "0.9", "--strategy", "left_to_right",
          "--no-ar", "--threads", "1", "--out", str(out)])
    report = json.loads(out.read_text())
    assert list(report["all"]) == ["diffusion@0.9/left_to_right"] and report["setup"]["strategy"] == "left_to_right"
    assert all(list(v) == ["diffusion@0.9/left_to_right"] for v in report["per_font"].values())


def test_evaluate_reads_pages_with_the_self_speculative_decoder(prefix, tmp_path):
    """``--self-speculative masks,runner-up``: one setting per draft branches, each the diffusion
    twin's block-length-1 decode (the same edits on every page), per font as well."""
    from nano_training.evaluate import main

    for bad in (["--self-speculative", "sideways"], ["--self-speculative", "masks", "--draft-length", "-3"]):
        with pytest.raises(SystemExit) as err:
            main(["--pair", str(prefix), *bad, "--out", str(tmp_path / "x.json")])
        assert err.value.code == 2 and not (tmp_path / "x.json").exists()
    out = tmp_path / "ss.json"
    main(["--pair", str(prefix), "--pages-per-font", "1", "--no-ar", "--no-diffusion", "--self-speculative",
          "masks,runner-up", "--draft-length", "3", "--threads", "1", "--out", str(out)])
    report = json.loads(out.read_text())
    assert list(report["all"]) == ["self-speculative/masks", "self-speculative/runner-up"]
    assert report["setup"]["draft_length"] == 3
    by = {s: [(r["page"], r["edits"], r["tokens"]) for r in report["rows"] if r["setting"] == s] for s in report["all"]}
    assert by["self-speculative/masks"] == by["self-speculative/runner-up"] and len(by["self-speculative/masks"]) == 3
    assert all(list(v) == list(report["all"]) for v in report["per_font"].values())
