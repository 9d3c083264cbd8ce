"""The "How it works" tab: short lessons for teaching, each tied to a live control of the Decode tab.

Each lesson names the decodes its "Try it" button runs (pair, decoder, settings); they play in the
tab's own player, so the Decode tab's controls never change behind the user's back.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mudiff_viz.decoding.settings import KNOBS
from mudiff_viz.views import lesson_figures
from mudiff_viz.views.lesson_figures import RunFigures, per_block, render, times

DEFAULTS = {"decoder": "diffusion", **{k.name: k.default for k in KNOBS}}  # a lesson's run changes some of them

CHAR, SUBWORD = "nano", "nano-subword"  # the two embedded pairs (the default "nano" is the character pair)
PAIR_NAMES = lesson_figures.PAIR_NAMES  # {CHAR: "character pair", SUBWORD: "subword pair"}


@dataclass(frozen=True)
class Run:
    """One decode of a lesson: which embedded pair, which decoder, which settings (changes from DEFAULTS)."""

    family: str
    settings: dict = field(default_factory=dict)
    decoder: str = "diffusion"
    label: str = ""  # the pane's title; a default names the pair and what differs
    reads: bool = False  # its text matters to the lesson: on the subword pair it runs a decoder that reads (self-speculative)


@dataclass(frozen=True)
class Lesson:
    """A lesson's text and the decodes its button runs, in the lesson's own player (side by side on
    one clock when there are two). The Decode tab's controls are never touched.

    The pair and strategy of each run are chosen so that what the text says is what the player shows
    on the bundled sample; docs/app.md lists each lesson's measured CER and effect.

    ``body`` and ``watch`` are templates: every figure in them is a field filled from the recording
    the lesson plays (``{0.forwards}``: the first pane's forward passes; views/lesson_figures.py
    names them), never typed in, so the words cannot drift from the run."""

    key: str
    title: str
    body: str
    button: str
    runs: tuple[Run, ...]
    watch: str  # one line under the result: what to look at
    cost: str = ""  # when a bad reading is the lesson's point, it says so here (shown with the CER)
    derive: Callable[[list[RunFigures]], dict[str, Any]] | None = None  # figures across panes (a ratio)

    def derived(self, panes: list[RunFigures]) -> dict[str, Any]:
        return self.derive(panes) if self.derive else {}


def run_settings(run: Run) -> dict:
    return {**DEFAULTS, **run.settings}


DECODER_NAMES = {"diffusion": "diffusion decoder", "ar": "AR decoder", "self-speculative": "self-speculative decoder",
                 "speculative": "speculative decoder"}


USES = {  # what a pane runs, per decoder: templates filled from its recording (views/lesson_figures.py)
    "diffusion": "`{0.strategy}`, block {0.block_length}, {0.steps} steps (at least {0.quota} per pass), "
                 "threshold {0.threshold:g}, {0.sampling}",
    "ar": "one token per forward, {0.sampling}",
    "self-speculative": "drafts {0.draft_length} tokens and verifies them itself ({0.floor_said}, {0.acceptance} "
                        "acceptance, `{0.draft_branches}` branches, {0.sampling}): the subword pair's decoder that "
                        "reads, its tokens exactly its block-length-1 decode",
    "speculative": "drafts {0.draft_length} tokens, its AR twin `{0.verifier}` verifies them ({0.floor_said}, "
                   "{0.acceptance} acceptance, {0.sampling})",
}


def uses_template(run: Run) -> str:
    """The template of a pane's *What runs* line: its pair, model and decoder, then the decoder's settings."""
    decoder = DECODER_NAMES.get(run.decoder, run.decoder)
    return ("{0.pair} (`{0.spec}`): `{0.model}`, {0.params_m:g}M parameters · " + decoder + ": "
            + USES.get(run.decoder, "{0.sampling}"))


def run_uses(run: Run, fig: RunFigures | None) -> str:
    """What a run uses, said on screen from its recording (``fig``): the pair and its spec, the model,
    the decoder and its settings as they ran (resolved: a draft length of 0, "the model's own", is
    said as the length the model used). With no recording, only the pair and the decoder."""
    if fig is None:
        return f"{PAIR_NAMES.get(run.family, run.family)} (`{run.family}`) · {DECODER_NAMES.get(run.decoder, run.decoder)}"
    return render(uses_template(run), [fig])


def run_label(run: Run) -> str:
    if run.label:
        return run.label
    pair = PAIR_NAMES.get(run.family, run.family)
    if run.decoder == "ar":
        return f"{pair} · AR"
    if run.decoder != "diffusion":
        return f"{pair} · {run.decoder}"
    s = run_settings(run)
    return f"{pair} · {s['strategy']}"


FF = {"strategy": "frontier_fallback"}

LESSONS = [
    Lesson(
        "masks", "1 · Masks and guesses",
        "A diffusion decoder does not write left to right. It starts from a row of **[MASK]** positions "
        "and, at every forward pass, the model guesses *all* masked positions at once. In the player "
        "these guesses are the faded italic **ghosts**: the fainter, the less sure the model is. Only "
        "some guesses are **committed** (solid, outlined when new); the rest are thrown away and guessed "
        "again at the next pass, now with more context. Untick *Show guesses* to see the bare masks. "
        "This lesson runs the **subword pair** (its blocks took {0.steps_said} passes here, "
        "{0.steps_per_block:.0f} on average, so there is a lot to watch) with `frontier_fallback`: when no guess is confident enough it commits next to the text "
        "already there.",
        "Try it: the subword pair, step by step",
        (Run(SUBWORD, FF, label="subword pair · frontier_fallback"),),
        "Scrub slowly: ghosts change under the frontier until they are committed, mostly left to right.",
    ),
    Lesson(
        "blocks", "2 · Blocks",
        "The text is cut into **blocks** of a fixed length. Blocks are decoded one after another (each "
        "new block sees the finished ones through the KV cache) and the positions *inside* a block are "
        "unmasked in parallel. Block length 1 would be plain autoregression; a longer block gives more "
        "parallelism but harder guesses. The header shows *block b/B · step s/S*. Here the **character "
        "pair**, which fills a whole block in one pass, runs with blocks of {0.block_length} and of {1.block_length} "
        "on one clock: {per_block}, so the block-{1.block_length} pane needs {times} the passes "
        "({1.forwards} against {0.forwards}). *Committed this step* in the header, like the line under it, counts "
        "**every line together**: up to {1.block_length} positions per line per pass in the block-{1.block_length} "
        "pane, so its first pass commits {1.first_forward_tokens} over {1.first_forward_lines} lines.",
        "Try it: block length 32 vs 8",
        (Run(CHAR, {}, label="character pair · block 32"),
         Run(CHAR, {"block_length": 8, "steps": 8}, label="character pair · block 8")),
        "Count the blocks in the header: each pass of the block-{1.block_length} pane fills {1.block_length} positions "
        "per line.",
        derive=lambda p: {"times": times(p[1].forwards, p[0].forwards), "per_block": per_block(p)},
    ),
    Lesson(
        "threshold", "3 · The confidence threshold",
        "The release's rule: after each forward pass, commit **every** guess whose confidence is above "
        "the threshold; if none passes, commit the *quota* (or, with `frontier_fallback`, the position next "
        "to the text). A lower threshold commits more per pass (fewer forwards, faster) and commits more "
        "wrong guesses. The subword pair at **{0.threshold:g} and at {1.threshold:g}** on one clock: **the "
        "{1.threshold:g} pane reads badly, and that is the point of this lesson**: it finishes in far fewer passes "
        "({1.forwards} against {0.forwards}), and a large part of what it commits is wrong (CER {1.cer:.1f}% against "
        "{0.cer:.1f}%). Watch the *Guess confidence* chart: the dashed line is the threshold.",
        "Try it: threshold 0.95 vs 0.5",
        (Run(SUBWORD, FF, label="subword pair · threshold 0.95"),
         Run(SUBWORD, {**FF, "threshold": 0.5}, label="subword pair · threshold 0.5")),
        "Compare the two clocks and the two CERs: speed bought with accuracy.",
        cost="a low threshold commits guesses the model is unsure of: the high CER is what this lesson shows",
    ),
    Lesson(
        "steps", "4 · Steps and the quota",
        "*Steps* is the largest number of forwards a block may take. It sets the quota: at least "
        "`block length / steps` positions are committed per pass, so {0.block_length} positions in {0.steps} "
        "steps means {0.quota} per pass even when the model is unsure. `low_confidence_static` commits exactly "
        "the quota, the most confident {0.quota} each time, so every block took {0.steps_said} passes here. The **character pair** knows where "
        "every character is, so its forced commits are still right.",
        "Try it: 4 steps, exactly the quota",
        (Run(CHAR, {"strategy": "low_confidence_static", "steps": 4}, label="character pair · 4 steps, static quota"),),
        "Every pass commits {0.quota} positions per line (the Positions committed per forward chart).",
    ),
    Lesson(
        "strategy", "5 · Remasking strategies",
        "Which masked positions to commit is a policy, separate from the model. `low_confidence_static` "
        "commits exactly the quota of most confident guesses; `random` picks positions at random (the "
        "original masked-diffusion recipe); `left_to_right` forces AR order with the same diffusion "
        "model; `frontier_fallback` keeps the release's threshold but, when nothing passes, commits "
        "next to the text already there instead of the most confident guess anywhere (the subword "
        "lessons use it: the release's fallback makes the subword pair commit far guesses it is unsure "
        "of). Here the **subword pair** runs `{0.strategy}` and `{1.strategy}` with {0.steps} steps per block of "
        "{0.block_length}, {0.quota} position per pass, on one clock: same model, {per_block}, opposite orders (a "
        "pane whose text ends sooner, its end-of-text committed early, runs fewer blocks: {0.blocks} against "
        "{1.blocks} here). The subword "
        "pair places a token from the text before it, so the order decides the reading: **the random pane "
        "misreads most of the page, and that is this lesson's point**; left to right reads it.",
        "Try it: random vs left to right",
        (Run(SUBWORD, {"strategy": "random", "steps": 32}, label="subword pair · random"),
         Run(SUBWORD, {"strategy": "left_to_right", "steps": 32}, label="subword pair · left_to_right")),
        "The Decoding order chart: the random pane is scattered, the left-to-right pane a diagonal; then compare the CERs.",
        derive=lambda p: {"per_block": per_block(p)},
        cost="committed in random order, the subword pair places tokens with no text before them: the high CER is what this lesson shows",
    ),
    Lesson(
        "ar", "6 · Why autoregression differs",
        "An autoregressive (AR) decoder commits exactly **one token per forward pass**, left to right, "
        "and never revisits it. Diffusion can commit several per pass and sees the right-hand context "
        "while guessing, but spends extra passes on hard positions. The character pair's AR and "
        "diffusion twins on one clock: count forward passes ({0.forwards} for AR, {1.forwards} for diffusion "
        "here), or switch the clock to wall time, where each "
        "decoder's prefill (vision encoder + prompt) is shown separately so the comparison is fair. The "
        "**Compare** tab does the same for any page and model.",
        "Try it: AR vs diffusion",
        (Run(CHAR, {}, decoder="ar", label="character pair · AR"),
         Run(CHAR, {}, label="character pair · diffusion")),
        "The AR pane adds one token per line per pass; the diffusion pane fills whole blocks.",
    ),
    Lesson(
        "pairs", "7 · Two small models, and the real one between them",
        "The two embedded pairs bracket the real model. The **character pair** reads glyph by glyph and "
        "knows where every character is, so its diffusion decoder commits a block's tokens at its first pass "
        "({0.first_step_share:.0%} of them here). The **subword pair** has the real model's shape: it must infer where a token lies from the text "
        "before it, so only its guesses next to the text are sure (lessons 1 and 3 show its diffusion decoder "
        "committing at the frontier, pass by pass, and what committing far guesses costs). Here the subword "
        "pair **reads** with its **self-speculative decoder**: its diffusion twin drafts the next "
        "{1.draft_length} tokens in one forward and checks them itself in the next, keeping those it agrees with "
        "(exactly its block-length-1 reading; lesson 8 shows the drafts): {1.tokens_per_forward:.2f} tokens per "
        "forward here. The real MinerU-Diffusion model, far larger, sits between the two: it too infers where a "
        "token lies from the text before it, and its release reports a few tokens per forward.",
        "Try it: both pairs on one clock",
        (Run(CHAR, {}, label="character pair · diffusion"),
         Run(SUBWORD, {}, decoder="self-speculative", label="subword pair · self-speculative", reads=True)),
        "One pane fills each block in {0.steps_said} pass; the other adds {1.tokens_per_forward:.2f} checked tokens per "
        "forward on average, from the left.",
    ),
    Lesson(
        "drafts", "8 · Diffusion drafts, AR verifies",
        "A diffusion model guesses many positions in one forward, but the subword pair's far guesses are often "
        "wrong (lessons 3 and 5). **Draft and verify** keeps the parallel guess and none of its errors: the "
        "diffusion twin **drafts** the next few tokens in one forward ({1.draft_length} on this pair); a **verifier** checks all of them in one "
        "forward and keeps the longest prefix it agrees with (**accepted**), plus its own token where it first "
        "disagrees (the draft there is **rejected** and replaced; the drafts after it are discarded). With the "
        "**speculative decoder** the AR twin verifies, so the text is exactly the AR twin's own greedy reading; "
        "with the **self-speculative decoder** the diffusion twin verifies itself (its block-length-1 "
        "prediction), and one forward both verifies the last drafts and drafts the next ones. Three panes on "
        "one clock, all the subword pair: its AR twin (one token per forward), speculative and self-speculative. "
        "The line above the player says what the forwards bought: drafts proposed, accepted and rejected, and "
        "tokens per forward against AR's {0.tokens_per_forward:g}.",
        "Try it: AR, speculative and self-speculative",
        (Run(SUBWORD, {}, decoder="ar", label="subword pair · AR"),
         Run(SUBWORD, {}, decoder="speculative", label="subword pair · speculative", reads=True),
         Run(SUBWORD, {}, decoder="self-speculative", label="subword pair · self-speculative", reads=True)),
        "Count the forwards: the AR pane adds one token per line per forward; the others jump ahead where drafts are accepted.",
    ),
]


def lesson_spec(family: str, available: list[str]) -> str:
    """The model spec a lesson's run uses: its family when the picker offers it, else the default pair."""
    if family in available:
        return family
    return CHAR if CHAR in available else (available[0] if available else CHAR)


READING_GUIDE = """
### Reading the player

* **Header**: *block b/B · step s/S · masks left · committed this step*; the line below says why the
  policy committed what it did at this pass.
* **Token states**: not yet reached (hidden) · masked (a ░ cell) · ghost guess (faded italic: the
  model's current guess, fainter when less sure) · committed this step (black outline) · committed
  earlier (coloured by confidence on the colour-blind-safe cividis ramp). Committed tokens below the
  *Underline below* confidence are underlined, so low confidence is visible without colour. **EOS**
  marks the end of text, whichever pair wrote it. Positions the model filled after it, inside its
  block, show as small grey pips (∙) while the block is open, then are dropped, as the decoder drops
  them (tick *Keep discarded* to keep them drawn).
* **Hover** a token or a box on the page: the five best candidates at the current step, when it was
  committed, and its guess history (how often the guess changed). **Click** to pin it; the page box
  and the token highlight each other.
* **Clocks**: *forward passes* (one tick per batched forward) or *wall time* (the strip below the
  player shows each decoder's prefill separately).
* Keys: space play/pause, ← → step, Home / End.
"""
