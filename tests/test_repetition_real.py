"""MinerU2.5 as its client ships it: n-gram blocking and repetition, presence and frequency
penalties in the AR loop's Sampler chain, token for token equal to ``transformers.generate`` with
the same processors on a tiny random Qwen2-VL checkpoint in the official layout (written by the
tests). The random model repeats one token forever when nothing stops it, so every rule has work."""

from __future__ import annotations

import pytest
import torch
from transformers import LogitsProcessor, LogitsProcessorList

from models import registry
from mudiff_viz.core.errors import UserInputError
from mudiff_viz.core.trace import check_invariants
from mudiff_viz.decoding.pipeline import decode_page, make_params
from mudiff_viz.inputs.pages import load_page
from tests.test_real_models import ar_dir, diffusion_dir, page_png  # noqa: F401  (fixtures)


class PresenceFrequency(LogitsProcessor):
    """vLLM's presence and frequency penalties over the generated tokens (a reference written here,
    independently of mudiff_viz/decoding/repetition.py)."""

    def __init__(self, prompt_len: int, presence: float, frequency: float) -> None:
        self.prompt_len, self.presence, self.frequency = prompt_len, presence, frequency

    def __call__(self, input_ids, scores):
        gen = input_ids[:, self.prompt_len:]
        counts = torch.zeros_like(scores).scatter_add_(1, gen, torch.ones_like(gen, dtype=scores.dtype))
        return scores - self.frequency * counts - self.presence * (counts > 0).to(scores.dtype)


@pytest.fixture(scope="module")
def backend(ar_dir):
    registry._cache.clear()
    yield registry.load_backend(str(ar_dir), "ar", device="cpu")
    registry._cache.clear()


def ours(backend, page, n: int, **knobs) -> tuple[list[int], dict]:
    trace = decode_page(page, decoder="ar", backend=backend, params=make_params(max_new_tokens=n, **knobs))
    assert check_invariants(trace) == []
    return [t.id for t in trace.regions[0].tokens], trace.params


def generated(backend, page, n: int, presence: float = 0.0, frequency: float = 0.0, **kwargs) -> list[int]:
    region = backend.regions(page)[0]
    vision = backend.images(backend.images.region_image(page.image, region))
    ids = backend.text.prompt_ids(region.prompt, vision.n_tokens)
    inp = torch.tensor([ids])
    extra = LogitsProcessorList([PresenceFrequency(len(ids), presence, frequency)]) if presence or frequency else None
    out = backend.model.generate(
        input_ids=inp, pixel_values=vision.pixel_values, image_grid_thw=vision.grid_thw,
        mm_token_type_ids=(inp == backend.text.ids.image_pad).int(), max_new_tokens=n, do_sample=False,
        eos_token_id=sorted(backend.stop_ids), pad_token_id=0, logits_processor=extra, **kwargs)
    return out[0, len(ids):].tolist()


def test_mineru25_decodes_with_its_clients_100_gram_block_by_default(backend, page_png):
    """auto = client-hf: no_repeat_ngram_size 100, as the client passes to generate. The random model
    repeats one token (the prompt's last one); once 100 of them stand in a row the block fires, exactly
    where generate's does."""
    page = load_page(page_png)
    mine, params = ours(backend, page, 210)
    assert params["repetition"] == "auto" and params["repetition_applied"] == {
        "rules": "client-hf", "by_task": {"text": {"no_repeat_ngram_size": 100, "repetition_penalty": 1.0,
                                                   "presence_penalty": 0.0, "frequency_penalty": 0.0}}}
    plain, off = ours(backend, page, 210, repetition="off")
    assert off["repetition_applied"]["rules"] == "off"
    first_change = next(i for i, (a, b) in enumerate(zip(mine, plain)) if a != b)
    assert len(set(plain)) == 1 and first_change >= 99  # the block fired, and no earlier than a 100-gram can
    assert mine == generated(backend, page, 210, no_repeat_ngram_size=100)
    assert plain == generated(backend, page, 210)


@pytest.mark.parametrize("knobs, kwargs", [
    (dict(no_repeat_ngram_size=2), dict(no_repeat_ngram_size=2)),
    (dict(no_repeat_ngram_size=1), dict(no_repeat_ngram_size=1)),
    (dict(repetition_penalty=4.0), dict(repetition_penalty=4.0)),
    (dict(repetition_penalty=0.7, no_repeat_ngram_size=3), dict(repetition_penalty=0.7, no_repeat_ngram_size=3)),
    (dict(presence_penalty=1.0, frequency_penalty=0.05), dict(presence=1.0, frequency=0.05)),
    (dict(presence_penalty=0.3, frequency_penalty=0.2, repetition_penalty=1.2, no_repeat_ngram_size=4),
     dict(presence=0.3, frequency=0.2, repetition_penalty=1.2, no_repeat_ngram_size=4)),
])
def test_custom_rules_equal_generate_with_the_same_processors(backend, page_png, knobs, kwargs):
    page = load_page(page_png)
    mine, params = ours(backend, page, 40, repetition="custom", **knobs)
    plain, _ = ours(backend, page, 40, repetition="off")
    assert mine != plain  # the rule changed the decode
    assert mine == generated(backend, page, 40, **kwargs)
    assert params["repetition_applied"]["by_task"]["text"] == {**{"no_repeat_ngram_size": 0, "repetition_penalty": 1.0,
                                                                  "presence_penalty": 0.0, "frequency_penalty": 0.0},
                                                               **knobs}


def test_client_vllm_rules_are_per_task_and_recorded(backend, page_png):
    """The vLLM path's penalties: text 1.0 / 0.05, tables 1.0 / 0.005, layout none, all with the
    100-gram block; the text decode equals generate with those processors."""
    page = load_page(page_png)
    mine, params = ours(backend, page, 40, repetition="client-vllm")
    assert params["repetition_applied"]["by_task"]["text"]["presence_penalty"] == 1.0
    assert mine == generated(backend, page, 40, presence=1.0, frequency=0.05, no_repeat_ngram_size=100)
    from mudiff_viz.decoding.repetition import rules_for

    _, rules = rules_for(make_params(repetition="client-vllm"), backend, ["table", "formula", "layout"])
    assert [(r.presence_penalty, r.frequency_penalty, r.no_repeat_ngram_size) for r in rules] == [
        (1.0, 0.005, 100), (1.0, 0.05, 100), (0.0, 0.0, 100)]


def test_a_two_stage_decode_records_every_tasks_rules(backend, page_png):
    from models.mineru_common.layout import parse_layout
    from mudiff_viz.decoding.autoregressive import decode_autoregressive
    from mudiff_viz.decoding.sequential import decode_sequential

    page = load_page(page_png)
    params = make_params(max_new_tokens=8, repetition="client-vllm")
    layout = decode_autoregressive(backend, page, [backend.layout_region(page, "detection")], params)
    blocks = parse_layout("<|box_start|>050 100 900 300<|box_end|><|ref_start|>title<|ref_end|><|rotate_up|>\n"
                          "<|box_start|>050 500 900 850<|box_end|><|ref_start|>table<|ref_end|><|rotate_up|>",
                          page.width, page.height)
    trace = decode_sequential(backend, page, blocks, decode_autoregressive, params, before=[layout])
    by_task = trace.params["repetition_applied"]["by_task"]
    assert sorted(by_task) == ["layout", "table", "text"] and by_task["table"]["frequency_penalty"] == 0.005
    assert check_invariants(trace) == []


def test_a_model_without_client_settings_has_them_off_and_refuses_client_sets(diffusion_dir, page_png):
    """Only AR decodes read the rules; the nano AR twin has no client: auto is off, client-* is refused."""
    from tests.fixed_backend import FixedBackend, FixedPage

    trace = decode_page(FixedPage(), decoder="ar", backend=FixedBackend(n_rows=1), params=make_params(max_new_tokens=8))
    assert trace.params["repetition_applied"]["rules"] == "off"
    with pytest.raises(UserInputError, match="no client-hf repetition settings"):
        decode_page(FixedPage(), decoder="ar", backend=FixedBackend(n_rows=1),
                    params=make_params(max_new_tokens=8, repetition="client-hf"))
    registry._cache.clear()
    diff = decode_page(load_page(page_png), str(diffusion_dir), "diffusion", make_params(max_new_tokens=8))
    assert "repetition" not in diff.params and "repetition_applied" not in diff.params
