"""docs/trace.md's JSON shape is generated from the schema (mudiff_viz/decoding/trace_doc.py): it
must match the code, list every key a decode writes, and follow the knobs with no hand edit."""

from __future__ import annotations

import dataclasses
import json

import pytest

from mudiff_viz.core.trace import Metrics, Trace
from mudiff_viz.decoding import trace_doc
from mudiff_viz.decoding.pipeline import decode_page
from mudiff_viz.decoding.settings import KNOBS, DecodeParams, Knob
from tests.fixed_backend import FixedBackend, FixedPage


def test_docs_trace_md_shape_is_the_generated_one():
    documented = trace_doc.documented_block(trace_doc.DOC.read_text())
    assert documented is not None, "docs/trace.md lost its trace-shape markers"
    assert documented == trace_doc.doc_block(), "docs/trace.md is stale: run python -m mudiff_viz.decoding.trace_doc"


@pytest.fixture(scope="module")
def decodes() -> list[Trace]:
    """Diffusion and AR, and diffusion region by region (merged), through the pipeline."""
    params = DecodeParams(block_length=8, steps=8, max_new_tokens=24)
    return [decode_page(FixedPage(), decoder=d, params=params, backend=FixedBackend(n_rows=2, eos_at={0: 12}),
                        batch_regions=batch) for d, batch in (("diffusion", True), ("ar", True), ("diffusion", False))]


def _documented_keys(record: str) -> set[str]:
    """The keys one record of the generated shape lists (its own lines, nested records excluded)."""
    lines = trace_doc.json_shape().splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith(f'  "{record}": {{'))
    keys = set()
    for ln in lines[start + 1:]:
        if ln.startswith("  }"):
            break
        if ln.startswith('    "'):
            keys.add(ln.split('"')[1])
    return keys


def test_every_key_a_decode_writes_is_documented(decodes):
    params, metrics = _documented_keys("params"), _documented_keys("metrics")
    assert {k.name for k in KNOBS} <= params and {f.name for f in dataclasses.fields(Metrics)} == metrics
    for trace in decodes:
        written = json.loads(trace.to_json())
        assert set(written["params"]) <= params, set(written["params"]) - params
        assert set(written["metrics"]) <= metrics
    assert any("regions_decoded" in t.metrics for t in decodes)  # the merged decodes wrote their optional key


def test_the_documented_params_are_the_recorded_ones(decodes):
    """Both ways: a key the doc lists as always recorded (for that decoder) is in the trace, so an
    entry of PARAMS_ADDED outlives no loop change unnoticed."""
    for trace in decodes:
        always = {"decoder", "record"} | {k.name for k in KNOBS if trace.decoder in k.decoders and not k.needs}
        always |= {name for name, a in trace_doc.PARAMS_ADDED.items() if not a.when_set and trace.decoder in a.decoders}
        model_knobs = {k.name for k in KNOBS if k.needs}  # recorded where the model has them (the nano pairs' anchoring)
        assert always <= set(trace.params) <= always | model_knobs, (trace.decoder, set(trace.params) ^ always)


def test_a_new_knob_appears_in_the_shape_with_its_help(monkeypatch):
    knob = Knob("dummy_knob", 3, int, "Dummy", "a knob that exists only in this test", 0, 9)
    monkeypatch.setattr(trace_doc, "KNOBS", (*KNOBS, knob))
    line = next(ln for ln in trace_doc.json_shape().splitlines() if '"dummy_knob"' in ln)
    assert line.split("//")[0].strip() == '"dummy_knob": int,' and "a knob that exists only in this test" in line


def test_optional_keys_are_marked_and_not_nullable():
    shape = trace_doc.json_shape()
    assert '"cer"?: float,' in shape and '"truncated"?: str' in shape  # absent when unset, never null
    assert '"mask_id": int | null,' in shape and '"gt_text": str | null,' in shape  # written as null


def test_rewriting_the_doc_is_idempotent(tmp_path):
    doc = tmp_path / "trace.md"
    doc.write_text(f"# Trace\n\n{trace_doc.BEGIN}\nold shape\n{trace_doc.END}\n\nprose stays\n")
    assert trace_doc.write_doc(doc) is True
    text = doc.read_text()
    assert text.startswith("# Trace\n\n") and text.endswith("\n\nprose stays\n") and trace_doc.json_shape() in text
    assert trace_doc.write_doc(doc) is False and doc.read_text() == text
