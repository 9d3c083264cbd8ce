"""Every view of a trace has a memory bound: the worst trace an upload may be (its bulk one region's
ground truth) is viewed in the CLI and the Trace viewer under 1 GB, degraded with a note."""

from __future__ import annotations

import json

import pytest

import sys

from mudiff_viz.bench.trace_memory import BASE_TRACE, REPORT_PEAK, measure, run_child, write_worst_trace
from mudiff_viz.core.align import alignable, char_map, diff_ops
from mudiff_viz.core.order import recovery
from mudiff_viz.core.trace import Trace
from mudiff_viz.views.player import player_payload, token_correctness
from mudiff_viz.views.warnings import alignment_notes

PEAK_BOUND_MB = 1000  # the bound: the CLI view and the Trace viewer of a 48 MB trace


def test_worst_trace_is_viewed_under_a_gigabyte(tmp_path):
    result = measure(48, tmp_path)
    assert result["trace_bytes"] == 48_000_000 and result["gt_chars"] > 47_000_000
    for name in ("cli_view", "trace_viewer"):
        row = result[name]
        assert row["exit"] == 0, row
        assert 0 < row["peak_rss_mb"] < PEAK_BOUND_MB, (name, row)
    assert any("ground truth too long to align: colours off" in line for line in result["cli_view"]["stderr"])


def test_a_child_reports_its_own_peak_not_its_parents():
    """A large parent (a test worker late in the suite) must not lift the child's measured peak:
    Linux carries the parent's ru_maxrss across fork and exec, VmHWM it does not."""
    ballast = bytearray(600 * 1024 * 1024)
    ballast[:: 4096] = b"\1" * len(ballast[:: 4096])  # touched, so resident
    peak, rc, _ = run_child([sys.executable, "-c", REPORT_PEAK + "\n_report_peak()"])
    assert rc == 0 and 0 < peak < 200, peak
    del ballast


def test_too_long_ground_truth_leaves_tokens_uncoloured(tmp_path, monkeypatch):
    monkeypatch.setenv("MUDIFF_MAX_ALIGN_CHARS", "5000")
    trace = Trace.load(write_worst_trace(tmp_path / "t.json", 200_000))
    region = trace.regions[0]
    assert not alignable(region.text, region.gt_text)
    assert token_correctness(region) == [-1] * len(region.tokens)
    assert set(token_correctness(trace.regions[1])) <= {0, 1, -1} and 1 in token_correctness(trace.regions[1])
    assert char_map(region.text, region.gt_text) == [None] * len(region.text)
    assert diff_ops("ab", "x" * 6000) == [("replace", "ab", "x" * 6000)]
    notes = alignment_notes(trace)
    assert notes == [f"ground truth too long to align: colours off (region 1: {len(region.text):,} characters decoded, "
                     f"{len(region.gt_text):,} expected; limit 5,000 together)"]
    payload = player_payload(trace)
    assert len(payload["regions"][0]["gt"]) == 5001 and payload["regions"][0]["gt"].endswith("…")
    assert payload["regions"][1]["gt"] == trace.regions[1].gt_text
    recovery(trace)  # skips the region instead of aligning it


def test_regions_within_the_limit_are_still_coloured():
    trace = Trace.load(BASE_TRACE)
    assert not alignment_notes(trace)
    marks = [m for r in trace.regions for m in token_correctness(r)]
    assert marks.count(1) > len(marks) // 2
    doc = json.loads(BASE_TRACE.read_text())
    assert player_payload(trace)["regions"][0]["gt"] == doc["regions"][0]["gt_text"]


@pytest.mark.parametrize("chars", [16, 70_000])
def test_alignment_limit_bounds_rapidfuzz_memory(chars):
    """At the limit (hyp + ref = 200,000 characters) rapidfuzz's opcodes fit in a few MB."""
    import resource

    from mudiff_viz.core.align import opcodes

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    ops = opcodes("ab c" * (chars // 4), "xa bd" * ((200_000 - chars) // 5))
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert ops is not None and grown_mb < 100
