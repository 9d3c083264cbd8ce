"""Trace save/load, validation with the bad field named, and invariants."""

from __future__ import annotations

import copy
import json

import pytest

from mudiff_viz.core.errors import UserInputError
from mudiff_viz.core.limits import Limits
from mudiff_viz.core.trace import SCHEMA_VERSION, Trace, check_invariants
from mudiff_viz.decoding.diffusion import decode_diffusion
from mudiff_viz.decoding.settings import DecodeParams
from tests.fixed_backend import FixedBackend, FixedPage


@pytest.fixture(scope="module")
def trace() -> Trace:
    backend = FixedBackend(seed=1, n_rows=2, eos_at={0: 12})
    return decode_diffusion(backend, FixedPage(), backend.regions(None), DecodeParams(block_length=8, steps=8, max_new_tokens=24))


def test_roundtrip_is_lossless(trace, tmp_path):
    trace.save(tmp_path / "t.json")
    back = Trace.load(tmp_path / "t.json")
    assert back.to_dict() == trace.to_dict()
    assert back.to_json() == trace.to_json()
    assert check_invariants(back) == []


def _mutate(trace: Trace, fn) -> str:
    d = copy.deepcopy(trace.to_dict())
    fn(d)
    return json.dumps(d)


BAD = [
    (lambda d: d.pop("steps"), "'steps' is missing"),
    (lambda d: d.update(schema_version=4), "'schema_version' is 4"),
    (lambda d: d.update(decoder=7), "'decoder' must be a string"),
    (lambda d: d["model"].pop("name"), "'model.name' is missing"),
    (lambda d: d["model"].update(mask_id="MASK"), "'model.mask_id' must be an integer"),
    (lambda d: d["steps"][0].pop("positions"), "'steps[0].positions' is missing"),
    (lambda d: d["page"]["occluded"].append({"box": [1, 2], "text": "x"}), "'page.occluded[0].box' must have 4"),
    (lambda d: d["regions"][1]["tokens"][3].update(confidence="high"), "'regions[1].tokens[3].confidence' must be a number"),
    (lambda d: d["regions"][0]["tokens"][0].update(confidence=1.5), "'regions[0].tokens[0].confidence' must be in [0, 1]"),
    (lambda d: d["regions"][0].update(bbox=[1, 2, 3]), "'regions[0].bbox' must have 4 numbers"),
    (lambda d: d["steps"][2]["confidences"].pop(), "'steps[2].confidences' has"),
    (lambda d: d["steps"][0].update(region=7), "'steps[0].region' is 7"),
    (lambda d: d["steps"][1]["committed"].__setitem__(0, 3), "'steps[1].committed[0]' must be 0 or 1"),
    (lambda d: d["steps"][1]["topk"][0].__setitem__(0, [1]), "'steps[1].topk[0][0]' must be [id, probability]"),
    (lambda d: d["page"].update(width=-5), "'page.width' must be positive"),
    (lambda d: d["regions"][0]["tokens"][0].update(evil=1), "'regions[0].tokens[0].evil' is not a TokenRecord field"),
]


@pytest.mark.parametrize("mutation,message", BAD)
def test_invalid_trace_names_the_field(trace, mutation, message):
    with pytest.raises(UserInputError) as err:
        Trace.loads(_mutate(trace, mutation))
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def test_non_finite_and_deep_and_big_traces_are_refused(trace):
    text = trace.to_json().replace('"wall_s":', '"wall_s":NaN,"x":', 1)
    with pytest.raises(UserInputError, match="non-finite"):
        Trace.loads(text)
    with pytest.raises(UserInputError, match="nested deeper"):
        Trace.loads("[" * 100 + "]" * 100)
    with pytest.raises(UserInputError, match="too large"):
        Trace.loads(trace.to_json(), Limits(max_trace_bytes=100))
    with pytest.raises(UserInputError, match="not valid JSON"):
        Trace.loads("{nope")
    with pytest.raises(UserInputError, match="must be an object"):
        Trace.loads("[1, 2]")


def test_invariants_catch_double_commits(trace):
    bad = Trace.loads(trace.to_json())
    s = bad.steps[0]
    bad.steps.append(copy.deepcopy(s))  # the same positions committed again
    assert any("committed twice" in p for p in check_invariants(bad))
    bad2 = Trace.loads(trace.to_json())
    bad2.metrics.nfe += 1
    assert any("metrics.nfe" in p for p in check_invariants(bad2))


def test_clock_values_are_bounded(trace):
    """A small trace claiming a billion forwards would make viewers allocate per-forward arrays."""
    with pytest.raises(UserInputError, match="'steps\\[0\\].forward' is 1000000000"):
        Trace.loads(_mutate(trace, lambda d: d["steps"][0].update(forward=10**9)))
    with pytest.raises(UserInputError, match="'steps\\[0\\].forward' is -1"):
        Trace.loads(_mutate(trace, lambda d: d["steps"][0].update(forward=-1)))
    with pytest.raises(UserInputError, match="commit_forward"):
        Trace.loads(_mutate(trace, lambda d: d["regions"][0]["tokens"][0].update(commit_forward=10**9)))


def _as_version_1(trace: Trace) -> dict:
    """The same decode as a version 1 file wrote it: nfe / commit_step, no mask id or page extras."""
    d = copy.deepcopy(trace.to_dict())
    d["schema_version"] = 1
    for st in d["steps"]:
        st["nfe"] = st.pop("forward")
    for r in d["regions"]:
        for t in r["tokens"]:
            t["commit_step"] = t.pop("commit_forward")
    d["model"] = {k: d["model"][k] for k in ("name", "spec", "params_m")}
    d["page"] = {k: v for k, v in d["page"].items() if k not in ("occluded", "probes", "exif_orientation")}
    d["vocab"]["8"] = "<mask>"
    return d


def test_version_1_files_load_upgraded(trace):
    old = Trace.loads(json.dumps(_as_version_1(trace)))
    assert old.schema_version == SCHEMA_VERSION and old.model.mask_id == 8  # read off the vocabulary, as version 1 viewers did
    assert [s.forward for s in old.steps] == [s.forward for s in trace.steps]
    assert [t.commit_forward for r in old.regions for t in r.tokens] == [t.commit_forward for r in trace.regions for t in r.tokens]
    assert check_invariants(old) == []
    bad = _as_version_1(trace)
    bad["steps"][0]["nfe"] = "x"
    with pytest.raises(UserInputError, match="'steps\\[0\\].forward' must be an integer"):
        Trace.loads(json.dumps(bad))


def test_the_schema_is_the_dataclasses():
    """Validation walks the dataclasses: every field without a default is required, and every
    field the dataclasses have is accepted (a field added there is checked with no other edit)."""
    import dataclasses

    from mudiff_viz.core.trace import PageRecord, StepRecord, TokenRecord

    for cls in (StepRecord, TokenRecord, PageRecord):
        required = [f.name for f in dataclasses.fields(cls)
                    if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
        assert required  # the checks below are not vacuous
    backend = FixedBackend(seed=1)
    t = decode_diffusion(backend, FixedPage(), backend.regions(None), DecodeParams(block_length=4, steps=4, max_new_tokens=8))
    for name in [f.name for f in dataclasses.fields(StepRecord)]:
        d = t.to_dict()
        if d["steps"][0].pop(name, None) is None:  # a field written only when set: absent here already
            Trace.loads(json.dumps(d))
            continue
        default = next(f for f in dataclasses.fields(StepRecord) if f.name == name).default
        if default is dataclasses.MISSING:
            with pytest.raises(UserInputError, match=f"'steps\\[0\\].{name}' is missing"):
                Trace.loads(json.dumps(d))
        else:
            Trace.loads(json.dumps(d))


def test_trace_records_mask_id_and_block_settings(trace):
    assert trace.model.mask_id == 8 and trace.params["block_length"] == 8 and "prefill_block" in trace.params
    assert trace.block_length == 8 and trace.clock_length == 1 + max(s.forward for s in trace.steps)


# ---- metrics: typed, written as before -------------------------------------------------------------

METRICS_BAD = [
    (lambda d: d["metrics"].update(nfe="12"), "'metrics.nfe' must be an integer"),
    (lambda d: d["metrics"].pop("tokens"), "'metrics.tokens' is missing"),
    (lambda d: d["metrics"].update(speed=3), "'metrics.speed' is not a Metrics field"),
    (lambda d: d["metrics"].update(truncated=5), "'metrics.truncated' must be a string"),
]


@pytest.mark.parametrize("mutation,message", METRICS_BAD)
def test_metrics_are_typed(trace, mutation, message):
    with pytest.raises(UserInputError) as err:
        Trace.loads(_mutate(trace, mutation))
    assert message in str(err.value)


def test_optional_metrics_are_absent_when_unset(trace):
    """recording_s, cer, regions_decoded and truncated are keys only when they have a value, in one fixed order."""
    from mudiff_viz.core.trace import Metrics

    d = trace.to_dict()["metrics"]
    assert list(d) == ["nfe", "commit_passes", "batched_forwards", "tokens", "text_chars", "tokens_per_forward",
                       "wall_s", "prefill_s", "decode_s", "time_to_first_token_s", "recording_s",
                       "truncated"]  # the page has no truth; row 1 writes no stop token in its 24
    assert d["truncated"] == "cut at 24 tokens, 1 of 2 regions"
    assert "cer" not in trace.metrics and trace.metrics.cer is None and dict(trace.metrics) == d
    full = copy.deepcopy(trace)
    full.metrics.truncated, full.metrics.cer, full.metrics.regions_decoded = "time limit of 1 s", 0.25, 2
    written = json.loads(full.to_json())["metrics"]
    assert list(written)[-3:] == ["regions_decoded", "cer", "truncated"] and written["cer"] == 0.25
    back = Trace.loads(full.to_json())
    assert isinstance(back.metrics, Metrics) and back.metrics.truncated == "time limit of 1 s" and back.metrics["cer"] == 0.25
    assert back.to_json() == full.to_json()


def test_shipped_traces_load_and_rewrite_unchanged():
    """Traces written before Metrics was typed: the bundled examples (version 1, upgraded on load)
    keep their metrics key for key and in order; corpus traces (version 2) come back byte for byte."""
    from pathlib import Path

    import pyarrow.parquet as pq

    root = Path(__file__).resolve().parent.parent
    examples = sorted((root / "assets" / "traces").glob("*.json"))
    assert examples
    for path in examples:
        raw = json.loads(path.read_text())
        written = Trace.load(path).to_json()
        assert json.loads(written)["metrics"] == raw["metrics"] and list(json.loads(written)["metrics"]) == list(raw["metrics"])
        assert Trace.loads(written).to_json() == written
    stored = [s for s in pq.read_table(root / "assets" / "corpus" / "pages", columns=["trace_json"]).column("trace_json").to_pylist() if s]
    sample = [s for s in stored if '"decoder":"ar"' in s][:3] + [s for s in stored if '"decoder":"diffusion"' in s][:3]
    assert len(sample) == 6
    for s in sample:  # stored at this version: rewritten byte for byte
        assert f'"schema_version":{SCHEMA_VERSION},' in s
        assert Trace.loads(s).to_json() == s
        # a version 2 file of a plain decode is the same text (version 3 only added optional fields)
        v2 = s.replace(f'"schema_version":{SCHEMA_VERSION},', '"schema_version":2,', 1)
        assert Trace.loads(v2).to_json() == s
    spec = [s for s in stored if '"decoder":"self-speculative"' in s]
    assert spec and all('"verdicts"' in s for s in spec[:3])  # the store keeps the draft records


def test_clock_bound_is_one_rule_for_files_and_built_traces(trace):
    """Validation (files) and the player's check (traces built in memory) refuse the same clocks."""
    from mudiff_viz.core.trace import clock_bound
    from mudiff_viz.views.player import check_clock

    bound = clock_bound(len(trace.steps), trace.n_tokens)
    # the schema's rule alone (from_dict): moving the last step's forward also contradicts its tokens'
    # commit forwards, which loads() refuses on its own (tests/test_trace_meaning.py)
    edge = Trace.from_dict(json.loads(_mutate(trace, lambda d: d["steps"][-1].update(forward=bound - 1))))
    assert edge.clock_length == bound
    check_clock(edge)  # the longest clock a file may claim plays
    with pytest.raises(UserInputError, match=f"must be in 0..{bound - 1}"):
        Trace.loads(_mutate(trace, lambda d: d["steps"][-1].update(forward=bound)))
    edge.steps[-1].forward = bound
    with pytest.raises(UserInputError, match=f"its clock has {bound + 1} forwards"):
        check_clock(edge)


def test_the_recorder_pauses_the_garbage_collector_only_while_it_makes_records():
    """Records are made with the cyclic collector off (it walked the whole heap every few thousand
    lists); pauses nest, and the collector comes back as it was."""
    import gc

    from mudiff_viz.decoding.observers import collector_paused

    assert gc.isenabled()
    seen = []
    with collector_paused():
        seen.append(gc.isenabled())
        with collector_paused():
            seen.append(gc.isenabled())
        seen.append(gc.isenabled())
    assert seen == [False, False, False] and gc.isenabled()
    gc.disable()
    try:  # a collector someone else turned off stays off
        with collector_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


@pytest.mark.parametrize("decoder,batch", [("self-speculative", False), ("self-speculative", True), ("diffusion", True)])
def test_the_vocabulary_names_every_id_the_records_show_and_records_run_in_clock_order(decoder, batch):
    """The recorder collects the ids of the alternatives it keeps as it makes the records (numpy, per
    flush); the trace's vocabulary must still name every one, and every committed token. Draft-and-verify
    records of different widths are made a width at a time, then put back in clock order."""
    import random

    from mudiff_viz.decoding.pipeline import decode_page
    from mudiff_viz.inputs import synth

    page = synth.random_page(random.Random(4), "val").render(150)
    tr = decode_page(page, model="nano", decoder=decoder, params=DecodeParams(max_new_tokens=60), batch_regions=batch)
    shown = {int(i) for s in tr.steps for pairs in s.topk for i, _ in pairs} | {t.id for r in tr.regions for t in r.tokens}
    assert shown and {int(k) for k in tr.vocab} == shown
    forwards = [s.forward for s in tr.steps]
    assert forwards == sorted(forwards)
    if decoder == "self-speculative":
        assert len({len(s.positions) for s in tr.steps}) > 1  # records of several widths were made
    assert check_invariants(tr) == []
