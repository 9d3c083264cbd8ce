"""The MinerU-Diffusion release's own output imported as a trace (mudiff_viz/decoding/release_import.py).

The inputs are made here in the release's format: an answer decoded block by block, each block's
positions committed over several forwards with a global 1-based step counter (the release's
``step_map``), the answer cut before its stop token and ``step_map`` cut at the end of that block.
The tokenizer is a tiny official-layout ``tokenizer.json`` (models/mineru_common/standin.py).
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image, ImageDraw

import mudiff_viz as mv
from models.mineru_common.standin import write_standin_tokenizer
from mudiff_viz.core.errors import UserInputError
from mudiff_viz.core.trace import Trace, check_invariants
from mudiff_viz.decoding.release_import import load_tokenizer, release_output, release_trace
from mudiff_viz.inputs.pages import load_page
from mudiff_viz.views.player import player_payload

ROOT = Path(__file__).resolve().parent.parent
ANSWER = "Text Recognition: a helpful assistant. Table Recognition: Formula Recognition:"
L = 4


def make_kit(d: Path) -> dict:
    """A tokenizer folder, a page image and the tokenizer itself, under ``d``."""
    ids = write_standin_tokenizer(d / "ckpt")
    img = Image.new("RGB", (420, 160), "white")
    ImageDraw.Draw(img).text((10, 60), ANSWER[:40], fill="black")
    img.save(d / "page.png")
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(d / "ckpt" / "tokenizer.json"))
    return {"dir": d, "ckpt": d / "ckpt", "page": d / "page.png", "ids": ids, "tok": tok}


@pytest.fixture(scope="module")
def kit(tmp_path_factory):
    return make_kit(tmp_path_factory.mktemp("release"))


def release_generate(answer: list[int], stop: int, filler: int, seed: int = 0, idle_after: tuple[int, ...] = (),
                     block: int = L):
    """What the release's generate returns for one row: the answer cut before the stop token,
    ``step_map`` (1-based global forward of each commit) and ``step_time`` up to the end of the
    stop token's block. ``idle_after``: blocks after which the row sat through one more forward
    that committed nothing of it (another row of the batch still had masks)."""
    seq = answer + [stop]
    seq += [filler] * (-len(seq) % block)
    rng = random.Random(seed)
    step_map = [0] * len(seq)
    g = 0
    for b in range(len(seq) // block):
        left = list(range(b * block, (b + 1) * block))
        rng.shuffle(left)
        while left:
            g += 1
            for _ in range(min(len(left), rng.randint(1, 3))):
                step_map[left.pop()] = g
        if b in idle_after:
            g += 1
    step_time = [round(0.5 + 0.03 * s, 4) for s in step_map]
    return answer, step_map, step_time


def encode(kit, text: str) -> list[int]:
    return kit["tok"].encode(text, add_special_tokens=False).ids


def test_imported_trace_validates_plays_and_follows_step_map(kit):
    answer = encode(kit, ANSWER)
    stop, filler = kit["ids"]["<|im_end|>"], kit["ids"]["<|endoftext|>"]
    tokens, step_map, step_time = release_generate(answer, stop, filler, seed=3, idle_after=(0,))
    trace = mv.from_release(torch.tensor([tokens]), torch.tensor([step_map]), step_time=torch.tensor([step_time]),
                            image=kit["page"], tokenizer=kit["ckpt"], block_length=L, threshold=0.95)
    assert len(answer) > 2 * L  # three blocks at least
    assert check_invariants(trace) == []
    again = Trace.loads(trace.to_json())  # the file checks: schema, meaning, counts
    assert again.text == trace.text == kit["tok"].decode(answer, skip_special_tokens=False) == ANSWER
    forwards = max(step_map)
    n_blocks = len(step_map) // L
    assert trace.clock_length == forwards
    assert trace.metrics.nfe == forwards + n_blocks and trace.metrics.commit_passes == n_blocks
    assert len(trace.steps) == forwards
    assert [t.commit_forward for t in trace.regions[0].tokens] == [s - 1 for s in step_map[:len(answer)]]
    assert [t.commit_time_s for t in trace.regions[0].tokens] == step_time[:len(answer)]
    for s in trace.steps:  # each forward lists exactly the answer positions committed there
        assert s.positions == [p for p in range(len(answer)) if step_map[p] == s.forward + 1]
        assert s.committed == [1] * len(s.positions) and s.topk == [[] for _ in s.positions]
        assert s.block * L <= min(s.positions, default=s.block * L) and max(s.positions, default=0) < (s.block + 1) * L
    idle = [s for s in trace.steps if not s.positions and s.forward + 1 not in step_map]
    assert len(idle) == 1 and idle[0].block == 0  # the idle forward stays in the block before it
    assert trace.params["imported_from"] == "release generate" and trace.params["block_length"] == L
    assert trace.params["threshold"] == 0.95 and trace.model.name == "mineru-diffusion"
    assert trace.regions[0].n_generated == len(step_map)
    assert (trace.page.width, trace.page.height) == (420, 160)
    payload = player_payload(again)
    assert payload["clock"]["n"] == forwards and payload["recorded"]
    assert payload["params"]["imported_from"] == "release generate"
    assert all(v is None for v in payload["series"]["conf_mean"])  # no confidences: none charted
    assert sum(payload["series"]["kept"]) == len(answer)
    assert payload["clock"]["time"][-1] == max(step_time)


def test_an_uncut_answer_ends_at_its_stop_token(kit):
    """Tokens dumped before the release's cut: the trace ends at the first stop token, marked as such."""
    answer = encode(kit, "Layout Detection: helpful")
    stop, filler = kit["ids"]["<|im_end|>"], kit["ids"]["<|endoftext|>"]
    _, step_map, step_time = release_generate(answer, stop, filler, seed=1)
    seq = answer + [stop] + [filler] * (len(step_map) - len(answer) - 1)
    trace = mv.from_release(seq, step_map, step_time=step_time, image=kit["page"], tokenizer=kit["ckpt"],
                            block_length=L)
    toks = trace.regions[0].tokens
    assert len(toks) == len(answer) + 1 and toks[-1].stop and toks[-1].id == stop and toks[-1].text == ""
    assert toks[-1].commit_forward == step_map[len(answer)] - 1
    assert trace.text == kit["tok"].decode(answer, skip_special_tokens=False)
    assert Trace.loads(trace.to_json()).n_tokens == len(answer) + 1


def test_stop_id_adds_the_stop_token_the_release_cut_at(kit):
    answer = encode(kit, "Formula Recognition:")
    stop, filler = kit["ids"]["<|endoftext|>"], kit["ids"]["<|endoftext|>"]
    tokens, step_map, step_time = release_generate(answer, stop, filler, seed=2)
    trace = mv.from_release(tokens, step_map, step_time=step_time, stop_id=stop, image=kit["page"],
                            tokenizer=kit["ckpt"], block_length=L, task="formula")
    assert trace.regions[0].tokens[-1].stop and trace.regions[0].kind == "formula"
    assert check_invariants(trace) == []


def run_cli(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT), HF_HUB_OFFLINE="1")
    return subprocess.run([sys.executable, "-m", "mudiff_viz", *args], capture_output=True, text=True,
                          timeout=300, cwd=ROOT, env=env)


def test_cli_import_release_writes_a_trace_and_a_player(kit, tmp_path):
    answer = encode(kit, ANSWER)
    tokens, step_map, step_time = release_generate(answer, kit["ids"]["<|im_end|>"], kit["ids"]["<|endoftext|>"])
    src = tmp_path / "out.json"
    src.write_text(json.dumps({"tokens": [tokens], "step_map": [step_map], "step_time": [step_time],
                               "block_length": L, "threshold": 0.9, "denoising_steps": L}))
    res = run_cli("import-release", str(src), "--page", str(kit["page"]), "--tokenizer", str(kit["ckpt"]),
                  "--out", str(tmp_path / "t.json"), "--html", str(tmp_path / "t.html"))
    assert res.returncode == 0, res.stderr
    trace = Trace.load(tmp_path / "t.json")
    assert trace.text == ANSWER and trace.clock_length == max(step_map) and trace.params["steps"] == L
    html = (tmp_path / "t.html").read_text(encoding="utf-8")
    assert "data:image/jpeg;base64" in html and "release generate" in html


def bad_cases(kit) -> list[tuple[dict, str]]:
    answer = encode(kit, ANSWER)
    tokens, step_map, step_time = release_generate(answer, kit["ids"]["<|im_end|>"], kit["ids"]["<|endoftext|>"])
    swapped = step_map[L:2 * L] + step_map[:L] + step_map[2 * L:]
    return [
        ({"tokens": tokens, "step_map": step_map[:len(tokens) - 1]}, "every token needs its step"),
        ({"tokens": tokens, "step_map": [-1] + step_map[1:]}, "counts forwards from 1"),
        ({"tokens": tokens, "step_map": swapped}, "not monotone across blocks"),
        ({"tokens": [10 ** 6] + tokens[1:], "step_map": step_map}, "is not in the tokenizer"),
        ({"tokens": tokens, "step_map": step_map, "step_time": step_time[:-1]}, "step_time has"),
        ({"tokens": [tokens, tokens], "step_map": step_map}, "dump one row"),
        ({"tokens": tokens, "step_map": step_map + [99] * L}, "cuts step_map"),
        ({"tokens": tokens}, "has no 'step_map'"),
        ({"tokens": tokens, "step_map": step_map, "block_length": 0}, "positive integer"),
        ({"tokens": tokens, "step_map": step_map, "steps_map": []}, "unknown field"),
    ]


def test_bad_release_output_is_one_line(kit):
    """Each bad output is refused in one line naming the problem (the JSON and mv.from_release share the check)."""
    tokenizer, page = load_tokenizer(kit["ckpt"]), load_page(kit["page"])
    for data, words in bad_cases(kit):
        with pytest.raises(UserInputError, match=words) as exc:
            release_trace(release_output({"block_length": L, **data}), tokenizer, page)
        assert "\n" not in str(exc.value)
    data, words = bad_cases(kit)[1]
    with pytest.raises(UserInputError, match=words):
        mv.from_release(data["tokens"], data["step_map"], image=kit["page"], tokenizer=kit["ckpt"], block_length=L)


def test_cli_bad_input_exits_2_in_one_line(kit, tmp_path):
    data, words = bad_cases(kit)[2]  # non-monotone blocks
    src = tmp_path / "bad.json"
    src.write_text(json.dumps({**data, "block_length": L}))
    args = ("--page", str(kit["page"]), "--tokenizer", str(kit["ckpt"]), "--out", str(tmp_path / "t.json"))
    res = run_cli("import-release", str(src), *args)
    assert res.returncode == 2 and words in res.stderr and len(res.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "t.json").exists()
    src.write_text("{not json")
    res = run_cli("import-release", str(src), *args)
    assert res.returncode == 2 and "is not JSON" in res.stderr and len(res.stderr.strip().splitlines()) == 1
    res = run_cli("import-release", str(tmp_path / "missing.json"), *args)
    assert res.returncode == 2 and "no such file" in res.stderr
    src.write_text(json.dumps({**bad_cases(kit)[0][0], "step_map": bad_cases(kit)[2][0]["tokens"]}))
    res = run_cli("import-release", str(src), "--page", str(kit["page"]), "--tokenizer", str(tmp_path),
                  "--out", str(tmp_path / "t.json"))
    assert res.returncode == 2 and "tokenizer" in res.stderr and len(res.stderr.strip().splitlines()) == 1


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n=st.integers(1, 40), seed=st.integers(0, 10 ** 6), idle=st.sets(st.integers(0, 10), max_size=3),
       block=st.sampled_from([1, 2, 4, 8]))
def test_any_release_shaped_output_imports_to_a_valid_trace(kit, n, seed, idle, block):
    """Any answer length, commit order, block length and idle forwards: the trace loads, its clock is the
    release's forward count, and each token is committed at its step_map forward."""
    rng = random.Random(seed)
    answer = [rng.randrange(20, 300) for _ in range(n)]
    tokens, step_map, step_time = release_generate(answer, kit["ids"]["<|im_end|>"], kit["ids"]["<|endoftext|>"],
                                                   seed=seed, idle_after=tuple(idle), block=block)
    trace = release_trace(release_output({"tokens": tokens, "step_map": step_map, "step_time": step_time,
                                          "block_length": block}), load_tokenizer(kit["ckpt"]), load_page(kit["page"]))
    again = Trace.loads(trace.to_json())
    assert again.clock_length == max(step_map) == len(again.steps)
    assert [t.commit_forward + 1 for t in again.regions[0].tokens] == step_map[:n]
    assert again.metrics.commit_passes == len(step_map) // block
    assert player_payload(again)["clock"]["n"] == max(step_map)
