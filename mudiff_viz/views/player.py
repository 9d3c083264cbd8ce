"""Trace -> the player's payload: compact, columnar, sent to the browser once and played there.

The player works on *frames* ``s = 0..N`` where ``N`` is the trace's clock length (forward passes on
the shared clock). Frame 0 is the moment decoding starts (prefill done, nothing committed); frame
``s > 0`` shows the outcome of forward ``s - 1``: what it committed and the guesses ("ghosts") it
left on the positions that stay masked.

Every generated position is a *slot*: the tokens of each region (up to and including the stop
token) and the filler positions a diffusion block decoded after the stop (shown while their block is
open, then dropped, as the decoder drops them). Per slot: ``open`` is the first forward that saw it
(masked from then on), ``commit`` the forward that committed it.

Step records are flattened into *entries* (one per masked position per forward), grouped by
forward: ``tick_start[k]:tick_start[k+1]`` are the entries of forward ``k``. Probabilities are sent
as integers (confidences x 10^4, top-k probabilities x 10^3) to keep the payload small.

Model text is data here, never markup: the player inserts it with ``textContent``.
"""

from __future__ import annotations

import math

from mudiff_viz.core.align import opcodes
from mudiff_viz.core.limits import current
from mudiff_viz.core.counts import trace_counts
from mudiff_viz.core.errors import UserInputError
from mudiff_viz.core.order import occluded_spans, occluded_tokens
from mudiff_viz.core.trace import Trace, clock_bound

KIND = "mudiff-player"
VERSION = 1
CONF_SCALE = 10_000
TOPK_SCALE = 1_000

def check_clock(trace: Trace) -> None:
    """Refuse a trace whose clock its content cannot fill (an upload is untrusted).

    Every per-forward array of the payload is as long as the clock, so one step with ``nfe`` 10^9
    in a tiny file would make the server allocate gigabytes: the bound is the schema's
    (:func:`~mudiff_viz.core.trace.clock_bound`); negative clocks would index from the end. Loaded
    traces passed this in validation; this guards traces built in memory.
    """
    for i, s in enumerate(trace.steps):
        if s.forward < 0:
            raise UserInputError(f"invalid trace: field 'steps[{i}].forward' is {s.forward}: must be >= 0")
    for ri, r in enumerate(trace.regions):
        for ti, t in enumerate(r.tokens):
            if t.commit_forward < -1:
                raise UserInputError(f"invalid trace: field 'regions[{ri}].tokens[{ti}].commit_forward' is {t.commit_forward}")
    if trace.clock_length > clock_bound(len(trace.steps), trace.n_tokens):
        raise UserInputError(
            f"invalid trace: its clock has {trace.clock_length} forwards but only {len(trace.steps)} steps and "
            f"{trace.n_tokens} tokens (field 'steps[].forward' or 'regions[].tokens[].commit_forward')"
        )


def clock_times(trace: Trace) -> list[float]:
    """Wall time (s since the request) at which each forward on the shared clock finished."""
    n = trace.clock_length
    times = [math.nan] * n
    for s in trace.steps:
        if math.isnan(times[s.forward]) or s.time_s > times[s.forward]:
            times[s.forward] = s.time_s
    for r in trace.regions:  # forwards with no recorded step (recorded without steps): commit times
        for t in r.tokens:
            if 0 <= t.commit_forward < n and math.isnan(times[t.commit_forward]):
                times[t.commit_forward] = t.commit_time_s
    last = float(trace.metrics.prefill_s)
    for k in range(n):  # fill gaps (none in practice) and keep the clock monotone
        if math.isnan(times[k]) or times[k] < last:
            times[k] = last
        last = times[k]
    return times


def token_correctness(region) -> list[int]:
    """Per token of a region: 1 if all its characters match the ground truth, 0 if not, -1 unknown.

    Characters are matched by the Levenshtein alignment of the region's text with its ground truth;
    stop tokens, regions without ground truth and regions too long to align (``max_align_chars``) are
    unknown.
    """
    hyp = "".join(t.text for t in region.tokens)
    ops = None if region.gt_text is None else opcodes(hyp, region.gt_text)
    if ops is None:
        return [-1] * len(region.tokens)
    ok = [False] * len(hyp)
    for op in ops:
        if op.tag == "equal":
            for k in range(op.src_start, op.src_end):
                ok[k] = True
    out, pos = [], 0
    for t in region.tokens:
        n = len(t.text)
        out.append(-1 if t.stop or n == 0 else int(all(ok[pos : pos + n])))
        pos += n
    return out


def shown_gt(text: str | None) -> str | None:
    """Ground truth as the player shows it: cut at ``max_align_chars`` (a trace may carry megabytes
    of it, and the browser would hold every character in the page)."""
    cap = current().max_align_chars
    return text if text is None or len(text) <= cap else text[:cap] + "…"


def slots(trace: Trace, partial: bool = False) -> dict:
    """Columnar slot table plus the (region, position) -> slot index map.

    ``partial`` (a streamed snapshot): positions past a region's generated ones belong to the block
    still being denoised (only its step records know them): they are *pending* tokens, shown with
    the guess committed there so far, not filler."""
    region, pos, text, ids, commit, conf, box, stop, filler, correct, hidden = ([] for _ in range(11))
    pending: list[int] = []
    index: dict[tuple[int, int], int] = {}
    starts = []
    spans = occluded_spans(trace)
    for ri, r in enumerate(trace.regions):
        starts.append(len(region))
        correct.extend(token_correctness(r))
        hidden.extend(int(h) for h in occluded_tokens(r, spans.get(ri, [])))
        for p, t in enumerate(r.tokens):
            index[(ri, p)] = len(region)
            region.append(ri), pos.append(p), text.append(t.text), ids.append(t.id)
            commit.append(t.commit_forward), conf.append(round(t.confidence * CONF_SCALE)), box.append(t.box)
            stop.append(1 if t.stop else 0), filler.append(0)
    # filler: positions seen in steps beyond a region's tokens
    extra = sorted({(s.region, p) for s in trace.steps for p in s.positions if (s.region, p) not in index})
    n_tokens = len(region)
    for ri, p in extra:
        index[(ri, p)] = len(region)
        waiting = partial and p >= trace.regions[ri].n_generated
        region.append(ri), pos.append(p), text.append(""), ids.append(-1)
        commit.append(-1), conf.append(0), box.append(None), stop.append(0), filler.append(0 if waiting else 1)
        correct.append(-1), hidden.append(0)
        pending.append(int(waiting))
    opened = [-1] * len(region)
    seen = [-1] * len(region)
    for s in sorted(trace.steps, key=lambda s: s.forward):
        for p, c, cand, cf in zip(s.positions, s.committed, s.candidates, s.confidences):
            i = index[(s.region, p)]
            if opened[i] < 0:
                opened[i] = s.forward
            seen[i] = s.forward
            if c and i >= n_tokens:  # filler, or a pending token of the block in progress
                commit[i], ids[i], conf[i] = s.forward, cand, round(cf * CONF_SCALE)
                if not filler[i]:
                    text[i] = trace.token_text(cand)
    for i in range(len(region)):  # traces recorded without steps: a slot opens when it commits
        if opened[i] < 0:
            opened[i] = max(0, commit[i])
    close = [-1] * len(region)  # filler: last forward of its block (shown until then)
    if any(filler) and any(s.verdicts is not None for s in trace.steps):
        # draft and verify: a draft past the end of text is shown until the last forward that saw it
        close = [seen[i] if filler[i] else -1 for i in range(len(region))]
    elif any(filler):
        L = trace.block_length or 1
        block_end: dict[tuple[int, int], int] = {}
        for s in trace.steps:
            key = (s.region, s.block)
            block_end[key] = max(block_end.get(key, -1), s.forward)
        for i in range(len(region)):
            if filler[i]:
                close[i] = block_end.get((region[i], pos[i] // L), commit[i])
    return {
        "index": index,
        "table": {
            "region": region, "pos": pos, "text": text, "id": ids, "commit": commit, "conf": conf,
            "box": box, "stop": stop, "filler": filler, "open": opened, "close": close, "correct": correct,
            "occluded": hidden, "pending": [0] * n_tokens + pending,
        },
        "region_start": starts,
    }


def entries(trace: Trace, index: dict[tuple[int, int], int]) -> dict:
    """Step records flattened to one entry per masked position per forward, grouped by forward.

    A draft-and-verify trace adds, per entry, its ``verdict`` (core/trace.py ``VERDICTS``), the
    ``draft`` token it verified (-1: none) and ``role`` (1: the verifier model ran the forward). A
    position can have two entries in one forward: verified, then drafted again."""
    n = trace.clock_length
    by_tick: list[list] = [[] for _ in range(n)]
    for s in trace.steps:
        by_tick[s.forward].append(s)
    drafting = any(s.verdicts is not None for s in trace.steps)
    keys = ("slot", "cand", "conf", "commit", "topk_id", "topk_p") + (("verdict", "draft", "role") if drafting else ())
    out = {k: [] for k in keys}
    tick_start = []
    for k in range(n):
        tick_start.append(len(out["slot"]))
        for s in by_tick[k]:
            for j, p in enumerate(s.positions):
                out["slot"].append(index[(s.region, p)])
                out["cand"].append(s.candidates[j])
                out["conf"].append(round(s.confidences[j] * CONF_SCALE))
                out["commit"].append(s.committed[j])
                top = s.topk[j][:5]
                ids = [int(t[0]) for t in top] + [-1] * (5 - len(top))
                ps = [round(float(t[1]) * TOPK_SCALE) for t in top] + [0] * (5 - len(top))
                out["topk_id"].extend(ids)
                out["topk_p"].extend(ps)
            if drafting:
                m = len(s.positions)
                out["verdict"].extend(s.verdicts if s.verdicts is not None else [-1] * m)
                out["draft"].extend(s.drafts if s.drafts is not None else [-1] * m)
                out["role"].extend([int(s.role == "verifier")] * m)
    tick_start.append(len(out["slot"]))
    out["tick_start"] = tick_start
    return out


def series(trace: Trace, partial: bool = False) -> dict:
    """Per-forward series the player's header, captions and charts read (index k = forward k): the
    counts of core/counts.py (one source, so the header and the charts agree on every frame), plus
    the guesses' confidences.

    - ``masks_left``: positions still masked after forward k, in the blocks it denoised
    - ``committed`` = ``kept`` + ``fillers``: positions committed by forward k, of them tokens of the
      text (stop tokens and a snapshot's pending tokens included) and positions after its end
    - ``regions``: regions decoded by forward k; ``block`` (lowest), ``step`` / ``steps``: forward k
      is denoising step ``step`` (1-based) of a block that took ``steps`` forwards
    - ``forced: positions force-committed at the step limit
    - ``above``: guesses above the confidence threshold (diffusion with a threshold), fillers included
    - ``conf_min`` / ``conf_mean``: confidence of the guesses over the positions masked before forward k;
      None throughout for a trace imported from the release (``params.imported_from``: no confidences)
    - draft and verify only: ``verified`` (= ``accepted`` + ``rejected`` + ``discarded``), ``bonus``,
      ``drafted`` per forward
    """
    c = trace_counts(trace, partial)
    f = c.per_forward
    n = c.forwards
    conf_min, conf_mean = [None] * n, [None] * n
    sums, counts, above = [0.0] * n, [0] * n, [0] * n
    threshold = None if trace.is_autoregressive else trace.params.get("threshold")
    guessed = not trace.params.get("imported_from")  # an imported trace has commits only, no confidences
    for s in trace.steps:
        k = s.forward
        if s.confidences and guessed:
            lo = min(s.confidences)
            conf_min[k] = lo if conf_min[k] is None else min(conf_min[k], lo)
            sums[k] += sum(s.confidences)
            counts[k] += len(s.confidences)
            if threshold is not None:
                above[k] += sum(1 for c_ in s.confidences if c_ > threshold)
    for k in range(n):
        if counts[k]:
            conf_mean[k] = sums[k] / counts[k]
    r4 = lambda v: None if v is None else round(v, 4)  # noqa: E731
    out = {
        "masks_left": f.masks_left, "committed": f.committed, "kept": f.tokens, "fillers": f.fillers,
        "conf_min": [r4(v) for v in conf_min], "conf_mean": [r4(v) for v in conf_mean],
        "block": f.block, "step": f.step, "steps": f.steps, "regions": f.regions, "forced": f.forced,
        "above": above,
    }
    if trace.is_speculative or any(s.verdicts is not None for s in trace.steps):
        out.update(verified=f.verified, accepted=f.accepted, rejected=f.rejected, discarded=f.discarded,
                   bonus=f.bonus, drafted=f.drafted)
    return out


def n_blocks(trace: Trace) -> int:
    """Blocks of the longest region (diffusion); 0 for AR."""
    L = trace.block_length
    if not L:
        return 0
    if trace.steps:
        return 1 + max(s.block for s in trace.steps)
    return max((math.ceil(r.n_generated / L) for r in trace.regions), default=1)


def default_label(trace: Trace) -> str:
    """The pane's title: decoder and model (a speculative decode names its verifier too)."""
    who = trace.model.name
    if trace.verifier is not None and trace.verifier.name != trace.model.name:
        who = f"{who} drafts, {trace.verifier.name} verifies"
    return f"{'AR' if trace.is_autoregressive else trace.decoder} · {who}"


def stages(trace: Trace) -> dict | None:
    """A two-stage parse (mode "layout": region 0 is the layout pass, then one region per block it
    found): per region the first and last forward of its own decode on the shared clock (None: not
    decoded, a picture or past the time limit), the task it was read with and whether its text
    continues the previous block's. The player draws the blocks' boxes once the layout pass has
    ended and moves between the regions. None for any other trace: its payload has no "stages"."""
    regions = trace.regions
    if trace.params.get("mode") != "layout" or not regions or regions[0].kind != "layout":
        return None
    first: list[int | None] = [None] * len(regions)
    last: list[int | None] = [None] * len(regions)

    def seen(ri: int, k: int) -> None:
        first[ri] = k if first[ri] is None else min(first[ri], k)
        last[ri] = k if last[ri] is None else max(last[ri], k)

    for s in trace.steps:
        seen(s.region, s.forward)
    for ri, r in enumerate(regions):
        for t in r.tokens:
            if t.commit_forward >= 0:
                seen(ri, t.commit_forward)
    tasks = list(trace.params.get("region_tasks") or [])
    continues = set(trace.params.get("layout_continues") or [])
    return {
        "layout": 0,
        "prompt": trace.params.get("layout_prompt"),
        "regions": [{"first": first[i], "last": last[i], "task": tasks[i] if i < len(tasks) else None,
                     "continues": i in continues} for i in range(len(regions))],
    }


def player_payload(trace: Trace, image_url: str | None = None, label: str | None = None,
                   partial: bool = False, stream: str | None = None) -> dict:
    """Everything the player needs for one trace (JSON-serialisable, model text as plain strings).

    ``partial``: the decode is still running (a streamed snapshot: more frames will follow under the
    same ``stream`` id, and the player keeps its place when they arrive)."""
    check_clock(trace)
    sl = slots(trace, partial)
    two_stage = stages(trace)
    n = trace.clock_length
    m = trace.metrics
    threshold = None if trace.is_autoregressive else trace.params.get("threshold")
    if trace.params.get("strategy") not in (None, "low_confidence_dynamic"):
        threshold = None  # only the dynamic strategy compares with the threshold
    return {
        "kind": KIND,
        "version": VERSION,
        "partial": partial,
        "stream": stream,
        "label": label or default_label(trace),
        "decoder": trace.decoder,
        "model": {"name": trace.model.name, "spec": trace.model.spec, "params_m": trace.model.params_m},
        "params": {k: v for k, v in trace.params.items() if not isinstance(v, (dict, list))},
        "metrics": m.to_dict(),
        "text": trace.text,
        "gt_text": shown_gt(trace.gt_text),
        "page": {
            "w": trace.page.width, "h": trace.page.height, "source": trace.page.source, "image": image_url,
            "occluded": [o.box for o in trace.page.occluded],
            # a straightened scan: boxes are on the straight page, drawn turned back onto the upload
            "skew": ({"angle": trace.page.skew.angle, "w": trace.page.skew.width, "h": trace.page.skew.height}
                     if trace.page.skew else None),
        },
        "threshold": threshold,
        # draft and verify: which model drafted and which verified (self-speculative: the same one)
        "speculative": ({"drafter": trace.model.name, "verifier": (trace.verifier or trace.model).name}
                        if any(s.verdicts is not None for s in trace.steps) else None),
        "block_length": trace.block_length,
        "n_blocks": n_blocks(trace),
        "recorded": bool(trace.steps),
        "clock": {
            "n": n,
            "time": clock_times(trace),
            "prefill_s": float(m.prefill_s),
            "wall_s": float(m.wall_s),
        },
        "regions": [
            {
                "bbox": r.bbox, "kind": r.kind, "start": sl["region_start"][i], "n": len(r.tokens),
                "n_generated": r.n_generated, "text": r.text, "gt": shown_gt(r.gt_text),
            }
            for i, r in enumerate(trace.regions)
        ],
        "vocab": trace.vocab,
        "mask_ids": [] if trace.model.mask_id is None else [trace.model.mask_id],
        "slots": sl["table"],
        "entries": entries(trace, sl["index"]),
        "series": series(trace, partial),
        **({"stages": two_stage} if two_stage else {}),
    }


def compare_payload(panes: list[dict]) -> dict:
    """Two (or more) player payloads played on one shared clock."""
    return {"kind": KIND, "version": VERSION, "mode": "compare", "panes": panes}
