"""Trace save/load, validation with the bad field named, and invariants."""

from __future__ import annotations

import copy
import json

import pytest

from mudiff_viz.decoding.diffusion import DiffusionParams, decode_diffusion
from mudiff_viz.core.errors import UserInputError
from mudiff_viz.core.limits import Limits
from mudiff_viz.core.trace import Trace, check_invariants
from tests.fixed_backend import FixedBackend, FixedPage


@pytest.fixture(scope="module")
def trace() -> Trace:
    backend = FixedBackend(seed=1, n_rows=2, eos_at={0: 12})
    return decode_diffusion(backend, FixedPage(), backend.regions(None), DiffusionParams(block_length=8, steps=8, max_new_tokens=24))


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
    (lambda d: d.update(schema_version=2), "'schema_version' is 2"),
    (lambda d: d.update(decoder="lstm"), "'decoder'"),
    (lambda d: d["regions"][1]["tokens"][3].update(confidence="high"), "'regions[1].tokens[3].confidence' must be a number"),
    (lambda d: d["regions"][0]["tokens"][0].update(confidence=1.5), "'regions[0].tokens[0].confidence' must be in [0, 1]"),
    (lambda d: d["regions"][0].update(bbox=[1, 2, 3]), "'regions[0].bbox' must have 4 numbers"),
    (lambda d: d["steps"][2]["confidences"].pop(), "'steps[2].confidences' has"),
    (lambda d: d["steps"][0].update(region=7), "'steps[0].region' is 7"),
    (lambda d: d["steps"][1]["committed"].__setitem__(0, 3), "'steps[1].committed[0]' must be 0 or 1"),
    (lambda d: d["steps"][1]["topk"][0].__setitem__(0, [1]), "'steps[1].topk[0][0]' must be [id, probability]"),
    (lambda d: d["page"].update(width=-5), "'page.width' must be positive"),
    (lambda d: d["regions"][0]["tokens"][0].update(evil=1), "'regions[0].tokens[0].evil' is not a token field"),
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
    bad2.metrics["nfe"] += 1
    assert any("metrics.nfe" in p for p in check_invariants(bad2))


def test_clock_values_are_bounded(trace):
    """A small trace claiming a billion forwards would make viewers allocate per-forward arrays."""
    with pytest.raises(UserInputError, match="'steps\\[0\\].nfe' is 1000000000"):
        Trace.loads(_mutate(trace, lambda d: d["steps"][0].update(nfe=10**9)))
    with pytest.raises(UserInputError, match="'steps\\[0\\].nfe' is -1"):
        Trace.loads(_mutate(trace, lambda d: d["steps"][0].update(nfe=-1)))
    with pytest.raises(UserInputError, match="commit_step"):
        Trace.loads(_mutate(trace, lambda d: d["regions"][0]["tokens"][0].update(commit_step=10**9)))
