"""The draft-and-verify decoders on tiny random checkpoints in the official layouts (written by the
tests): MinerU-Diffusion's self-speculative decode equals its block-length-1 decode; MinerU-Diffusion
drafting for MinerU2.5 equals MinerU2.5's greedy decode (the two share a tokenizer here); a verifier
whose tokenizer differs is refused in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from models import registry
from mudiff_viz.core.errors import UserInputError
from mudiff_viz.core.trace import check_invariants
from mudiff_viz.decoding.pipeline import decode_page, make_params
from mudiff_viz.inputs.pages import load_page
from tests.test_real_models import ar_dir, diffusion_dir, page_png, write_ar_checkpoint  # noqa: F401  (fixtures)


def ids(trace) -> list[int]:
    return [t.id for r in trace.regions for t in r.tokens]


@pytest.fixture(autouse=True)
def fresh_registry():
    registry._cache.clear()
    yield
    registry._cache.clear()


def test_mineru_diffusion_self_speculative_is_its_block_length_1_decode(diffusion_dir, page_png):
    page = load_page(page_png)
    ref = decode_page(page, str(diffusion_dir), "diffusion", make_params(block_length=1, steps=1, max_new_tokens=40))
    spec = decode_page(page, str(diffusion_dir), "self-speculative", make_params(max_new_tokens=40, draft_length=4))
    assert len(ids(ref)) > 5 and ids(spec) == ids(ref)
    assert check_invariants(spec) == [] and spec.params["prefill_block"] == 1
    assert spec.metrics.nfe < ref.metrics.nfe  # the reference takes two forwards a token
    branched = decode_page(page, str(diffusion_dir), "self-speculative",
                           make_params(max_new_tokens=40, draft_length=4, draft_branches="runner-up", draft_floor=0.0))
    assert ids(branched) == ids(ref) and check_invariants(branched) == []  # runner-up branches: the same tokens
    last = decode_page(page, str(diffusion_dir), "self-speculative",
                       make_params(max_new_tokens=40, draft_length=4, draft_branches="last"))
    assert ids(last) == ids(ref) and check_invariants(last) == []  # one block after the last draft: the same tokens
    assert spec.params["draft_branches"] == "masks"  # auto: MinerU-Diffusion's own


def test_mineru_diffusion_drafts_for_mineru25(diffusion_dir, ar_dir, page_png):
    page = load_page(page_png)
    ref = decode_page(page, str(ar_dir), "ar", make_params(max_new_tokens=40))
    spec = decode_page(page, str(diffusion_dir), "speculative", make_params(max_new_tokens=40, draft_length=4,
                                                                            verifier=str(ar_dir)))
    assert len(ids(ref)) > 5 and ids(spec) == ids(ref) and spec.text == ref.text
    assert spec.verifier.name == "mineru2.5" and spec.model.name == "mineru-diffusion"
    assert check_invariants(spec) == []


def test_a_verifier_with_another_tokenizer_is_refused(diffusion_dir, page_png, tmp_path):
    other = write_ar_checkpoint(tmp_path / "other")
    tok = json.loads((other / "tokenizer.json").read_text())
    vocab = tok["model"]["vocab"]
    a, b = sorted(vocab, key=vocab.get)[100:102]
    vocab[a], vocab[b] = vocab[b], vocab[a]  # two ids swap meaning
    (other / "tokenizer.json").write_text(json.dumps(tok))
    with pytest.raises(UserInputError, match="different tokenizers"):
        decode_page(load_page(page_png), str(diffusion_dir), "speculative", make_params(verifier=str(other)))


def test_a_diffusion_model_without_an_ar_verifier_says_how(diffusion_dir, page_png):
    with pytest.raises(UserInputError, match="--verifier"):
        decode_page(load_page(page_png), str(diffusion_dir), "speculative", make_params())
