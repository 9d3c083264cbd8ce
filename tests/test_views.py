"""Views are pure functions of a Trace: the player payload, chart series, figures, tables, offline HTML."""

from __future__ import annotations

import dataclasses
import json
import re

import pytest

from mudiff_viz.core.trace import Trace, check_invariants
from mudiff_viz.decoding.autoregressive import decode_autoregressive
from mudiff_viz.decoding.diffusion import decode_diffusion
from mudiff_viz.decoding.settings import DecodeParams
from mudiff_viz.views import figures, tables
from mudiff_viz.views.assets import player_js
from mudiff_viz.views.export import script_json, standalone_html
from mudiff_viz.views.player import CONF_SCALE, compare_payload, player_payload
from tests.fixed_backend import FixedBackend, FixedPage

HOSTILE = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>'


@pytest.fixture(scope="module")
def diffusion() -> Trace:
    backend = FixedBackend(seed=1, n_rows=3, eos_at={0: 11, 2: 30})
    params = DecodeParams(block_length=8, steps=8, threshold=0.9, max_new_tokens=32)
    return decode_diffusion(backend, FixedPage(), backend.regions(None), params)


@pytest.fixture(scope="module")
def ar() -> Trace:
    backend = FixedBackend(seed=2, n_rows=2, eos_at={1: 5})
    return decode_autoregressive(backend, FixedPage(), backend.regions(None), DecodeParams(max_new_tokens=16))


def hostile(trace: Trace) -> Trace:
    """The same trace with model text that is markup: token id 0 displays as HOSTILE."""
    d = json.loads(trace.to_json())
    d["vocab"]["0"] = HOSTILE
    for r in d["regions"]:
        for t in r["tokens"]:
            if t["id"] == 0 and not t["stop"]:
                t["text"] = HOSTILE
        r["text"] = "".join(t["text"] for t in r["tokens"] if not t["stop"])
        r["gt_text"] = HOSTILE
    d["text"] = "\n".join(r["text"] for r in d["regions"])
    d["metrics"]["text_chars"] = len(d["text"])
    d["page"]["source"] = "<b>page</b>.pdf"
    return Trace.from_dict(d)


def test_payload_shape_and_slots(diffusion):
    p = player_payload(diffusion)
    assert p["kind"] == "mudiff-player" and p["decoder"] == "diffusion" and p["block_length"] == 8
    json.dumps(p, allow_nan=False)  # plain JSON
    s = p["slots"]
    n_tokens = diffusion.n_tokens
    n = len(s["region"])
    assert all(len(v) == n for v in s.values())
    assert sum(1 for f in s["filler"] if not f) == n_tokens
    # regions index their tokens in order
    for ri, r in enumerate(p["regions"]):
        assert [s["pos"][r["start"] + k] for k in range(r["n"])] == list(range(r["n"]))
        assert all(s["region"][r["start"] + k] == ri for k in range(r["n"]))
    # every token opens (is masked) no later than it commits; commit clocks are the trace's
    tokens = [t for r in diffusion.regions for t in r.tokens]
    for i, t in enumerate(tokens):
        assert s["commit"][i] == t.commit_forward
        assert 0 <= s["open"][i] <= s["commit"][i]
        assert s["conf"][i] == round(t.confidence * CONF_SCALE)
    # filler: the positions decoded after a stop token, shown until their block ends
    fill = [i for i in range(n) if s["filler"][i]]
    assert fill, "the fixture stops line 1 mid-block, so it has filler"
    for i in fill:
        assert s["pos"][i] >= p["regions"][s["region"][i]]["n"]
        assert s["commit"][i] <= s["close"][i]


def test_entries_match_the_steps(diffusion):
    p = player_payload(diffusion)
    e = p["entries"]
    assert len(e["tick_start"]) == diffusion.clock_length + 1
    assert e["tick_start"] == sorted(e["tick_start"])
    assert len(e["slot"]) == sum(len(s.positions) for s in diffusion.steps)
    assert len(e["topk_id"]) == len(e["topk_p"]) == 5 * len(e["slot"])
    # each forward's entries are exactly its steps' masked positions, with the same guesses
    for k in range(diffusion.clock_length):
        steps = [s for s in diffusion.steps if s.forward == k]
        lo, hi = e["tick_start"][k], e["tick_start"][k + 1]
        assert sorted(e["cand"][lo:hi]) == sorted(c for s in steps for c in s.candidates)
        assert sum(e["commit"][lo:hi]) == sum(sum(s.committed) for s in steps)


def test_series_are_computed_from_the_trace(diffusion):
    ser = player_payload(diffusion)["series"]
    n = diffusion.clock_length
    for k in range(n):
        steps = [s for s in diffusion.steps if s.forward == k]
        assert ser["committed"][k] == sum(sum(s.committed) for s in steps)
        assert ser["masks_left"][k] == sum(len(s.positions) - sum(s.committed) for s in steps)
        confs = [c for s in steps for c in s.confidences]
        assert ser["conf_min"][k] == pytest.approx(min(confs), abs=1e-4)
        assert ser["conf_mean"][k] == pytest.approx(sum(confs) / len(confs), abs=1e-4)
        # above the threshold at every position, fillers included: the caption compares it with
        # "committed this step", which counts fillers too
        assert ser["above"][k] == sum(1 for c in confs if c > 0.9)
        fillers = sum(c for s in steps for p, c in zip(s.positions, s.committed)
                      if p >= len(diffusion.regions[s.region].tokens))
        assert ser["fillers"][k] == fillers and ser["kept"][k] + fillers == ser["committed"][k]
        assert ser["regions"][k] == len(steps)
        assert 1 <= ser["step"][k] <= ser["steps"][k] <= 8
    assert sum(ser["kept"]) == diffusion.n_tokens
    # a block starts fully masked and ends with nothing left
    assert ser["step"][0] == 1 and ser["masks_left"][-1] == 0


def test_ar_payload_has_one_commit_per_line_and_forward(ar):
    p = player_payload(ar)
    assert p["decoder"] == "ar" and p["block_length"] is None and p["threshold"] is None
    assert not any(p["slots"]["filler"])
    assert p["series"]["committed"] == p["series"]["regions"]
    assert set(p["series"]["masks_left"]) == {0}
    # AR: each position is reached exactly at the forward that commits it
    assert p["slots"]["open"] == p["slots"]["commit"]


def test_clock_times_are_monotone_and_start_after_prefill(diffusion):
    c = player_payload(diffusion)["clock"]
    assert len(c["time"]) == c["n"] == diffusion.clock_length
    assert all(b >= a for a, b in zip(c["time"], c["time"][1:]))
    assert c["time"][0] >= c["prefill_s"]


def test_model_text_is_data_not_markup(diffusion):
    bad = hostile(diffusion)
    assert check_invariants(bad) == []
    p = player_payload(bad)
    assert HOSTILE in p["slots"]["text"] and p["vocab"]["0"] == HOSTILE  # passed through as plain strings
    html = standalone_html(bad)
    # nothing from the trace can open or close an element in the offline replay
    assert "<img src=x" not in html and "window.__pwned=2</script>" not in html
    assert "&lt;b&gt;page&lt;/b&gt;.pdf" in html  # the title is escaped
    data = re.search(r'<script type="application/json" id="mudiff-data">(.*?)</script>', html, re.S).group(1)
    assert json.loads(data)["vocab"]["0"] == HOSTILE
    assert "<" not in data and ">" not in data
    # the player never writes model text with innerHTML
    js = player_js()
    assert "innerHTML" not in js.replace("Never innerHTML", "")


def test_script_json_escapes_separators():
    s = script_json({"a": "</script><!--\u2028"})
    assert "</" not in s and "<!--" not in s and "\u2028" not in s
    assert json.loads(s) == {"a": "</script><!--\u2028"}


def test_compare_payload_holds_both_panes(ar, diffusion):
    p = compare_payload([player_payload(ar), player_payload(diffusion)])
    assert p["mode"] == "compare" and [x["decoder"] for x in p["panes"]] == ["ar", "diffusion"]


def test_commit_order_matrix_rows_are_blocks(diffusion, ar):
    m = figures.commit_order_matrix(diffusion)
    L = 8
    assert m["L"] == L
    assert len(m["rows"]) == sum((len(r.tokens) + L - 1) // L for r in diffusion.regions)
    first = diffusion.regions[0].tokens[:L]
    start = min(t.commit_forward for t in first)
    assert m["z"][0][: len(first)] == [t.commit_forward - start + 1 for t in first]
    a = figures.commit_order_matrix(ar)
    assert a["z"][0][: len(ar.regions[0].tokens)] == list(range(1, len(ar.regions[0].tokens) + 1))  # AR: left to right


def test_figures_build(diffusion, ar):
    for fig in (figures.commit_order_heatmap(diffusion), figures.confidence_histogram([ar, diffusion]),
                figures.tokens_per_forward([ar, diffusion]), figures.progress_curves([ar, diffusion], "wall"),
                figures.progress_curves([ar, diffusion], "forward")):
        d = fig.to_plotly_json()
        assert d["data"] and "frames" not in d or not d.get("frames")
    per = figures.commits_per_forward(diffusion)
    assert sum(per) == diffusion.n_tokens and len(per) == diffusion.clock_length
    hist = figures.confidence_histogram([diffusion]).data[0]
    assert len(hist.x) == diffusion.n_tokens


def test_tables(diffusion, ar):
    headers, rows = tables.metrics_table([ar, diffusion])
    assert headers == ["metric", "AR", "diffusion"]
    names = [r[0] for r in rows]
    for needed in ("tokens", "NFE (forwards per region, summed over the regions)", "tokens per forward", "wall time",
                   "time to first token", "CER vs ground truth"):
        assert needed in names
    assert all(len(r) == 3 for r in rows)
    seg = tables.diff_segments("the cat sat", "the hat sat!")
    assert "".join(t for t, lab in seg if lab in (None, "substituted", "extra")) == "the cat sat"
    assert "".join(t for t, lab in seg if lab in (None, "expected", "missing")) == "the hat sat!"
    assert ("!", "missing") in seg and ("c", "substituted") in seg and ("h", "expected") in seg
    assert "<" not in tables.summary_markdown(hostile(diffusion))
    m = diffusion.metrics
    assert f"(prefill {m['prefill_s']:.2f} s)" in tables.summary_markdown(diffusion)  # seconds in two decimals


def test_summary_explains_nfe_beside_the_batched_passes(diffusion, ar):
    """Before: "NFE 69" beside "4 forward passes" with nothing saying why both are right."""
    m = diffusion.metrics
    text = tables.summary_markdown(diffusion)
    assert diffusion.clock_length < m.nfe  # three regions batched
    assert (f"{diffusion.clock_length} forwards on the clock · NFE {m.nfe} (forwards per region summed over the "
            f"{len(diffusion.regions)} regions, plus {m.commit_passes} block-storing passes) · "
            f"{m.nfe and m.tokens / m.nfe:.2f} tokens per forward (tokens / NFE)") in text
    assert "regions" in text and "lines" not in text  # one name for one count
    one_region = dataclasses.replace(ar, regions=ar.regions[:1], steps=[s for s in ar.steps if s.region == 0])
    n = one_region.clock_length
    one_region = dataclasses.replace(one_region, metrics=dataclasses.replace(ar.metrics, nfe=n))
    assert f"{n} forwards = NFE {n} · 1.00 tokens per forward (tokens / NFE)" in tables.summary_markdown(one_region)
    # the player shows the same prefill as the summary (one source: metrics.prefill_s)
    assert player_payload(diffusion)["clock"]["prefill_s"] == m.prefill_s


def test_trace_recorded_without_steps_still_plays():
    backend = FixedBackend(seed=4, n_rows=2, eos_at={0: 6})
    params = DecodeParams(block_length=8, steps=8, max_new_tokens=16, record=False)
    trace = decode_diffusion(backend, FixedPage(), backend.regions(None), params)
    assert not trace.steps
    p = player_payload(trace)
    assert not p["recorded"] and not p["entries"]["slot"]
    last = max(t.commit_forward for r in trace.regions for t in r.tokens)
    assert p["clock"]["n"] == last + 1 == len(p["clock"]["time"]) == len(p["series"]["kept"])
    assert sum(p["series"]["kept"]) == trace.n_tokens
    assert p["slots"]["open"] == p["slots"]["commit"]


def test_token_correctness_against_ground_truth(diffusion):
    from mudiff_viz.views.player import token_correctness

    d = json.loads(diffusion.to_json())
    r = d["regions"][0]
    toks = [t for t in r["tokens"] if not t["stop"]]
    r["gt_text"] = r["text"][:2] + ("z" if r["text"][2] != "z" else "y") + r["text"][3:]
    t = Trace.from_dict(d)
    marks = token_correctness(t.regions[0])
    assert marks[:len(toks)] == [1, 1, 0] + [1] * (len(toks) - 3)
    assert all(m == -1 for m, tok in zip(marks, t.regions[0].tokens) if tok.stop)
    assert token_correctness(diffusion.regions[1]) == [-1] * len(diffusion.regions[1].tokens)  # no ground truth
    assert player_payload(t)["slots"]["correct"][:3] == [1, 1, 0]


def _with_confidence(trace: Trace, conf: float) -> Trace:
    d = json.loads(trace.to_json())
    for r in d["regions"]:
        for t in r["tokens"]:
            t["confidence"] = conf
    return Trace.from_dict(d)


def test_decode_warnings_say_why_a_result_is_suspect(diffusion):
    from mudiff_viz.views.diffs import diff_html, word_runs
    from mudiff_viz.views.warnings import decode_warnings

    assert decode_warnings(_with_confidence(diffusion, 0.99)) == []
    unsure = decode_warnings(_with_confidence(diffusion, 0.3))
    assert len(unsure) == 1 and "mean confidence 0.30" in unsure[0]
    d = json.loads(diffusion.to_json())
    for r in d["regions"]:
        r["tokens"], r["text"] = [], ""
    d["text"] = ""
    assert decode_warnings(Trace.from_dict(d))[0].startswith("No text was found")
    # word-level diffs: whole words, in reading order, model text escaped
    assert word_runs("the cat sat", "the cat sat") == [("equal", "the cat sat", "the cat sat")]
    runs = word_runs("the dog sat down", "the cat sat")
    assert ("replace", "dog", "cat") in runs and runs[-1] == ("insert", " down", "")
    html = diff_html("a <b>x</b> c", "a y c")
    assert "<del>y</del><ins>&lt;b&gt;x&lt;/b&gt;</ins>" in html and "<b>x" not in html


def test_summary_states_the_cuda_graphs_choice_on_a_gpu_only(diffusion):
    from mudiff_viz.cli.common import summary_line

    assert diffusion.params["cuda_graphs"] == "off: no CUDA"
    assert "CUDA graphs" not in tables.summary_markdown(diffusion) and "cuda-graphs" not in summary_line(diffusion)
    for choice in ("on", "off: MUDIFF_CUDA_GRAPHS=0"):
        gpu = dataclasses.replace(diffusion, params={**diffusion.params, "cuda_graphs": choice})
        assert f"CUDA graphs {tables.md_text(choice)}" in tables.summary_markdown(gpu)
        assert f"cuda-graphs={choice}" in summary_line(gpu)
    old = dataclasses.replace(diffusion, params={k: v for k, v in diffusion.params.items() if k != "cuda_graphs"})
    assert "CUDA graphs" not in tables.summary_markdown(old)  # a trace from before the key: nothing shown
