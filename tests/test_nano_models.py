"""The shipped nano pairs read real renders of held-out text; training runs and its loss falls.

Both embedded pairs are tested (docs/nano-models.md): the character pair (``nano-char``, the default
``nano``) and the subword pair (``nano-subword``). CER bounds are the targets plus a margin: the test
decodes one held-out page per font (the full evaluation over more pages lives in docs/nano-models.md),
so a single unlucky page must not fail CI. Margins: page CER <= 3% (target 2%); for the subword
pair's diffusion twin, at least 2 denoising steps per block (target 4) and at most 75% of tokens
committed at their block's first step (target 60%): the order must be there to watch.

The subword diffusion twin does not yet read to the 2% target (docs/nano-models.md gives its
measured CER and why); its bound below is the measured state with a margin, a regression guard,
not the target.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from models.registry import NANO_DIR, SHIPPED, family_installed
from nano_training.evaluate import eval_pages
from mudiff_viz.core.metrics import cer, first_step_share, mean_steps_per_block
from mudiff_viz.core.trace import check_invariants
from mudiff_viz.decoding.pipeline import decode_page
from mudiff_viz.decoding.settings import DecodeParams

FAMILIES = ("nano-char", "nano-subword")
CER_BOUND = 0.03
SUBWORD_DIFFUSION_CER_BOUND = 0.30  # v7 reads the 12 held-out pages at 12.7% (v5 14.5%, v1 20.8%; worst page 19.1%): a guard, not the target


each_family = pytest.mark.parametrize("family", [
    pytest.param(f, marks=pytest.mark.skipif(not family_installed(f), reason=f"{f} weights not in assets/models"))
    for f in FAMILIES
])


@pytest.fixture(scope="module")
def pages():
    return eval_pages(1, seed=4242)


@each_family
def test_weights_are_small_safetensors(family):
    for kind in ("ar", "diffusion"):
        path = NANO_DIR / f"{SHIPPED[family]}-{kind}" / "model.safetensors"
        assert path.stat().st_size <= 25 * 1024 * 1024
        assert (path.parent / "config.json").is_file()


@each_family
def test_both_decoders_read_held_out_pages(pages, family):
    subword = SHIPPED[family] != "nano-char"
    for label, page in pages:
        ar = decode_page(page, model=family, decoder="ar", params=DecodeParams(max_new_tokens=512))
        diff = decode_page(page, model=family, decoder="diffusion", params=DecodeParams(threshold=0.95, max_new_tokens=512))
        ar_cer, diff_cer = cer(ar.text, page.text), cer(diff.text, page.text)
        assert ar_cer <= CER_BOUND, (label, ar_cer)
        assert diff_cer <= (SUBWORD_DIFFUSION_CER_BOUND if subword else CER_BOUND), (label, diff_cer)
        if subword:  # the subword pair: a visible decoding order
            assert mean_steps_per_block(diff) >= 2.0, (label, mean_steps_per_block(diff))
            assert first_step_share(diff) <= 0.75, (label, first_step_share(diff))
        assert check_invariants(diff) == [] and check_invariants(ar) == []
        # page boxes come from the text layer: every visible token has one inside its line's box
        for region in diff.regions:
            for tok in region.tokens:
                if tok.text.strip():
                    assert tok.box is not None
                    assert region.bbox[0] - 2 <= tok.box[0] <= region.bbox[2] + 2


@each_family
def test_image_without_text_layer_decodes_with_ctc_boxes(tmp_path, family):
    """A scan with no text layer: lines segmented from the pixels, token boxes from the CTC path. The
    subword pair is held to this on its AR twin (its diffusion twin reads at 18.5% here, v5)."""
    from mudiff_viz.inputs.pages import load_page

    root = Path(__file__).resolve().parent.parent
    page = load_page(root / "assets" / "samples" / "scan-times.jpg")
    truth = (root / "assets" / "samples" / "scan-times.txt").read_text().strip()
    decoder = "ar" if SHIPPED[family] != "nano-char" else "diffusion"
    trace = decode_page(page, model=family, decoder=decoder, params=DecodeParams(max_new_tokens=512))
    assert cer(trace.text, truth) < 0.05
    boxed = [t for r in trace.regions for t in r.tokens if t.text.strip()]
    assert sum(t.box is not None for t in boxed) / len(boxed) > 0.95


@pytest.mark.skipif(not family_installed("nano-subword"), reason="nano-subword weights not in assets/models")
def test_tokenizer_round_trips_and_its_special_ids_are_the_backends():
    import string

    from models.nano.tokenizer import SUBWORD_SPECIALS, SubwordTokenizer
    from models.registry import load_backend

    tok = SubwordTokenizer(NANO_DIR / f"{SHIPPED['nano-subword']}-ar" / "tokenizer.json")
    samples = [string.printable, "".join(chr(c) for c in range(32, 127)), "  two  spaces\nand a line",
               "def f(x):\n    return x ** 2  # ok", "~`!@#$%^&*()_+-={}[]|\\:;\"'<>,.?/"]
    for text in samples:
        assert tok.decode(tok.encode(text)) == text
    for kind in ("ar", "diffusion"):
        backend = load_backend("nano-subword", kind)
        assert backend.tok.vocab_size == tok.vocab_size
        ids = {name: i for i, name in enumerate(SUBWORD_SPECIALS)}
        assert backend.stop_ids == frozenset({ids["<|endoftext|>"], ids["<|im_end|>"]})
        assert backend.tok.image_pad_id == ids["<|image_pad|>"] and backend.tok.bos_id == ids["<|im_start|>"]
        if kind == "diffusion":
            assert backend.mask_id == ids["<|MASK|>"]


def test_training_smoke_loss_falls(tmp_path):
    """The subword pair's recipe on tiny sizes: a BPE trained on the training split, AR steps whose
    loss falls, a resumed run, then the diffusion objective from the AR weights."""
    from nano_training import train
    from models.nano.tokenizer import SubwordTokenizer
    from nano_training.tokenizer import train_tokenizer
    from mudiff_viz.inputs import synth

    texts = [p for d in synth.documents("train")[:40] for p in d.paragraphs]
    train_tokenizer(texts, 320).save(str(tmp_path / "tokenizer.json"))
    assert SubwordTokenizer(tmp_path / "tokenizer.json").vocab_size == 320
    out = tmp_path / "ar"
    args = ["--kind", "ar", "--out", str(out), "--steps", "30", "--budget", "3000", "--pool-pages", "2", "--lr", "3e-3",
            "--warmup", "5", "--d-model", "64", "--layers", "1", "--enc-layers", "1", "--eval-every", "1000",
            "--checkpoint-every", "15", "--log-every", "5", "--threads", "1", "--refresh-every", "1000",
            "--tokenizer", str(tmp_path / "tokenizer.json")]
    train.main(args)
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    losses = [r["loss"] for r in rows if "loss" in r]
    assert len(losses) == 6 and losses[-1] < losses[0]
    train.main([*args[:5], "35", *args[6:]])  # resume to step 35
    assert "resumed from" in (out / "train.log").read_text()
    dout = tmp_path / "diff"
    train.main(["--kind", "diffusion", "--init", str(out), "--out", str(dout), "--steps", "40", *args[6:-2]])
    drows = [json.loads(x) for x in (dout / "metrics.jsonl").read_text().splitlines()]
    dl = [r["loss"] for r in drows if "loss" in r]
    assert len(dl) == 8 and all(math.isfinite(x) for x in dl)
    saved = json.loads((dout / "config.json").read_text())
    assert saved["kind"] == "diffusion" and saved["model_type"] == "nano" and (dout / "tokenizer.json").is_file()
