"""The MinerU-Diffusion release's own output as a Trace that plays.

See docs/real-models.md#playing-the-releases-own-output.

The release's ``generate`` returns the answer's token ids, a ``step_map`` (per position, the
1-based denoising forward that committed it, counted across blocks) and a ``step_time`` (seconds
since the decode began). It keeps no guesses or confidences, so the trace holds commits only: one
step record per denoising forward, listing the positions committed there. Its params say
``imported_from``, and the player then shows no confidence. Our clock is the release's: forward
``k`` is its step ``k + 1``; each block's cache-storing forward is counted in ``metrics.commit_passes``
(docs/trace.md#conventions), as the release runs one per block.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from models.mineru_common.checkpoint import read_json
from models.mineru_common.tasks import TASK_PROMPTS
from models.mineru_common.text import ChatText
from mudiff_viz.core.errors import ModelLoadError, UserInputError
from mudiff_viz.core.limits import Limits, current
from mudiff_viz.core.trace import ModelRecord, RegionRecord, StepRecord, TokenRecord, Trace, rnd
from mudiff_viz.decoding.build import page_record, run_metrics
from mudiff_viz.inputs.page import Page

IMPORTED_FROM = "release generate"  # params.imported_from: the trace was not recorded by this project
MODEL_NAME = "mineru-diffusion"
RELEASE_PARAMS_M = 2699.6  # the released checkpoint's parameters, millions (docs/real-models.md#gpu-check)
FIELDS = ("tokens", "step_map", "step_time", "block_length", "threshold", "denoising_steps", "task", "stop_id")


@dataclass
class ReleaseOutput:
    """What one row of the release's ``generate`` returned, plus the settings it ran with."""

    tokens: list[int]  # the answer's ids, cut before the stop token (the release's cut)
    step_map: list[int]  # per position: the 1-based forward that committed it; runs to the block end
    step_time: list[float] | None = None  # per position: seconds since the decode began
    block_length: int = 32
    threshold: float | None = None  # dynamic_threshold, when known
    denoising_steps: int | None = None
    task: str = "text"  # which prompt the page was read with: text, table, formula or layout
    stop_id: int | None = None  # the stop token the release cut at (its id), when known


def _ints(value: Any, name: str) -> list[int]:
    if isinstance(value, list) and len(value) == 1 and isinstance(value[0], list):
        value = value[0]  # a batch of one row, as generate returns it (tensor.tolist())
    if isinstance(value, list) and value and isinstance(value[0], list):
        raise UserInputError(f"'{name}' holds {len(value)} rows: dump one row of the batch (e.g. {name}[0].tolist())")
    if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        raise UserInputError(f"'{name}' must be a list of integers")
    return value


def _floats(value: Any, name: str) -> list[float]:
    if isinstance(value, list) and len(value) == 1 and isinstance(value[0], list):
        value = value[0]
    ok = isinstance(value, list) and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value)
    if not ok or not all(math.isfinite(v) and v >= 0 for v in value):
        raise UserInputError(f"'{name}' must be a list of finite, non-negative seconds")
    return [float(v) for v in value]


def release_output(data: dict[str, Any]) -> ReleaseOutput:
    """A :class:`ReleaseOutput` from the JSON object a researcher dumps (docs: the fields and their meaning)."""
    if not isinstance(data, dict):
        raise UserInputError("the release output must be a JSON object with 'tokens' and 'step_map'")
    unknown = sorted(set(data) - set(FIELDS))
    if unknown:
        raise UserInputError(f"unknown field '{unknown[0]}' in the release output (known: {', '.join(FIELDS)})")
    for key in ("tokens", "step_map"):
        if key not in data:
            raise UserInputError(f"the release output has no '{key}'")
    block_length = data.get("block_length", 32)
    if isinstance(block_length, bool) or not isinstance(block_length, int) or block_length < 1:
        raise UserInputError(f"'block_length' must be a positive integer, got {block_length!r}")
    threshold = data.get("threshold")
    if threshold is not None and (isinstance(threshold, bool) or not isinstance(threshold, (int, float))
                                  or not 0.0 <= threshold <= 1.0):
        raise UserInputError(f"'threshold' must be a number in [0, 1], got {threshold!r}")
    steps = data.get("denoising_steps")
    if steps is not None and (isinstance(steps, bool) or not isinstance(steps, int) or steps < 1):
        raise UserInputError(f"'denoising_steps' must be a positive integer, got {steps!r}")
    task = data.get("task", "text")
    if task not in TASK_PROMPTS:
        raise UserInputError(f"'task' must be one of {', '.join(TASK_PROMPTS)}, got {task!r}")
    stop_id = data.get("stop_id")
    if stop_id is not None and (isinstance(stop_id, bool) or not isinstance(stop_id, int)):
        raise UserInputError(f"'stop_id' must be a token id, got {stop_id!r}")
    step_time = data.get("step_time")
    return ReleaseOutput(
        tokens=_ints(data["tokens"], "tokens"), step_map=_ints(data["step_map"], "step_map"),
        step_time=None if step_time is None else _floats(step_time, "step_time"), block_length=block_length,
        threshold=None if threshold is None else float(threshold), denoising_steps=steps, task=task, stop_id=stop_id,
    )


def read_release_output(path: str | Path, limits: Limits | None = None) -> ReleaseOutput:
    """The release output in a JSON file, refused in one line when unreadable or too large."""
    limits = limits or current()
    p = Path(path)
    if not p.is_file():
        raise UserInputError(f"no such file: {p}")
    if p.stat().st_size > limits.max_trace_bytes:
        raise UserInputError(f"release output too large: {p.stat().st_size} bytes (limit {limits.max_trace_bytes})")
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UserInputError(f"{p.name} is not JSON: {str(exc).splitlines()[0]}") from None
    return release_output(data)


def load_tokenizer(model_dir: str | Path) -> ChatText:
    """The checkpoint's tokenizer (tokenizer.json, read offline by ``tokenizers``; config.json if present)."""
    d = Path(model_dir)
    if d.is_file() and d.name == "tokenizer.json":
        d = d.parent
    if not d.is_dir():
        raise UserInputError(f"no such tokenizer folder: {d}")
    try:
        return ChatText(d, read_json(d / "config.json", required=False) or {})
    except ModelLoadError as exc:
        raise UserInputError(f"cannot read the tokenizer: {exc}") from None


def check_output(out: ReleaseOutput, vocab_size: int, limits: Limits) -> None:
    """Refuse, in one line, an output the release's generate could not have returned."""
    n, m, L = len(out.tokens), len(out.step_map), out.block_length
    if m == 0:
        raise UserInputError("the release output has no tokens: step_map is empty")
    if m > limits.max_new_tokens:
        raise UserInputError(f"step_map has {m} positions, past the limit of {limits.max_new_tokens} "
                             "(MUDIFF_MAX_NEW_TOKENS)")
    if m < n:
        raise UserInputError(f"step_map has {m} entries but tokens has {n}: every token needs its step")
    if m > n and (m % L or m - n > L):
        raise UserInputError(f"step_map has {m} entries and tokens {n}: the release cuts step_map at the end of "
                             f"the block holding the stop token (block length {L})")
    if out.step_time is not None and len(out.step_time) != m:
        raise UserInputError(f"step_time has {len(out.step_time)} entries but step_map has {m}")
    for i, tid in enumerate(out.tokens + ([] if out.stop_id is None else [out.stop_id])):
        if not 0 <= tid < vocab_size:
            raise UserInputError(f"token id {tid} at position {i} is not in the tokenizer (ids 0 to {vocab_size - 1})")
    for i, s in enumerate(out.step_map):
        if s < 1:
            raise UserInputError(f"step_map[{i}] is {s}: the release counts forwards from 1 (0: never committed)")
    if out.stop_id is not None and m == n:
        raise UserInputError("'stop_id' given but step_map ends with the tokens: it has no step for the stop token")
    last = 0
    for b in range(math.ceil(m / L)):
        block = out.step_map[b * L:(b + 1) * L]
        if min(block) <= last:
            raise UserInputError(f"step_map is not monotone across blocks: block {b} commits at step {min(block)}, "
                                 f"not after block {b - 1}'s last step {last}")
        last = max(block)


def release_trace(out: ReleaseOutput, tokenizer: ChatText, page: Page, limits: Limits | None = None) -> Trace:
    """The release's output on ``page`` as a Trace: commits only, on the release's clock."""
    limits = limits or current()
    check_output(out, tokenizer.tok.get_vocab_size(with_added_tokens=True), limits)
    L, n_pos = out.block_length, len(out.step_map)
    ids = list(out.tokens)
    cut = next((i for i, t in enumerate(ids) if t in tokenizer.stop_ids), None)
    stop_id = out.stop_id
    if cut is not None:  # an uncut answer: the trace ends at its first stop token, as the release cuts
        ids, stop_id = ids[:cut], ids[cut]
    kept = ids + ([] if stop_id is None else [stop_id])
    texts = tokenizer.token_texts(ids)
    times = out.step_time or [0.0] * n_pos
    n_forwards = max(out.step_map)
    tokens = [TokenRecord(text=texts[p] if p < len(ids) else "", id=t, commit_forward=out.step_map[p] - 1,
                          commit_time_s=rnd(times[p]), confidence=0.0, stop=p == len(ids))
              for p, t in enumerate(kept)]
    time_of = [0.0] * n_forwards
    block_of = [-1] * n_forwards
    committed_at: list[list[int]] = [[] for _ in range(n_forwards)]
    for p, s in enumerate(out.step_map):
        time_of[s - 1] = max(time_of[s - 1], times[p])
        block_of[s - 1] = p // L
        if p < len(kept):
            committed_at[s - 1].append(p)
    steps = []
    block, t_last = 0, 0.0
    for k in range(n_forwards):  # a forward that committed nothing of this row stays in the block before it
        block = block_of[k] if block_of[k] >= 0 else block
        t_last = max(t_last, time_of[k])
        pos = committed_at[k]
        steps.append(StepRecord(forward=k, region=0, block=block, time_s=rnd(t_last), positions=pos,
                                candidates=[kept[p] for p in pos], confidences=[0.0] * len(pos),
                                committed=[1] * len(pos), topk=[[] for _ in pos]))
    text = "".join(texts)
    region = RegionRecord(bbox=[0.0, 0.0, float(page.width), float(page.height)], text=text, tokens=tokens,
                          gt_text=page.text, kind="page" if out.task == "text" else out.task, n_generated=n_pos)
    wall = max(times)
    metrics = run_metrics([region], seq_forwards=n_forwards, commit_passes=math.ceil(n_pos / L),
                          batched_forwards=n_forwards + math.ceil(n_pos / L), wall_s=wall, prefill_s=0.0,
                          text=text, gt_text=page.text)
    params: dict[str, Any] = {
        "decoder": "diffusion", "block_length": L, "strategy": "low_confidence_dynamic",
        **({} if out.threshold is None else {"threshold": out.threshold}),
        **({} if out.denoising_steps is None else {"steps": out.denoising_steps}),
        "mode": "page", "task": out.task, "record": True, "n_regions": 1, "prefill_block": L, "loop": "eager",
        "imported_from": IMPORTED_FROM, "step_time": "given" if out.step_time is not None else "absent",
    }
    vocab = {str(t): tokenizer.token_text(t) for t in sorted(set(kept))}
    mask_id = _mask_id(tokenizer)
    return Trace(decoder="diffusion", model=ModelRecord(name=MODEL_NAME, spec=f"{MODEL_NAME} ({IMPORTED_FROM})",
                                                        params_m=RELEASE_PARAMS_M, mask_id=mask_id),
                 params=params, page=page_record(page), text=text, metrics=metrics, regions=[region], steps=steps,
                 gt_text=page.text, vocab=vocab)


def _mask_id(tokenizer: ChatText) -> int | None:
    try:
        return tokenizer.mask_id({})
    except ModelLoadError:
        return None
