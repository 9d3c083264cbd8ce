"""The "How it works" tab: short lessons for teaching, each tied to a live control of the Decode tab.

Each lesson names the settings its "Try it" button applies; the app wires the button to set those
controls, switch to the Decode (or Compare) tab and run.
"""

from __future__ import annotations

from dataclasses import dataclass, field

DEFAULTS = {"decoder": "diffusion", "block_length": 32, "steps": 32, "threshold": 0.95, "temperature": 0.0,
            "strategy": "low_confidence_dynamic"}


@dataclass(frozen=True)
class Lesson:
    key: str
    title: str
    body: str
    button: str
    settings: dict = field(default_factory=dict)  # changes from DEFAULTS
    tab: str = "decode"


LESSONS = [
    Lesson(
        "masks", "1 · Masks and guesses",
        "A diffusion decoder does not write left to right. It starts from a row of **[MASK]** positions "
        "and, at every forward pass, the model guesses *all* masked positions at once. In the player "
        "these guesses are the faded italic **ghosts**: the fainter, the less sure the model is. Only "
        "some guesses are **committed** (solid, outlined when new); the rest are thrown away and guessed "
        "again at the next pass, now with more context. Untick *Show guesses* to see the bare masks.",
        "Try it: decode with the default settings", {},
    ),
    Lesson(
        "blocks", "2 · Blocks",
        "The text is cut into **blocks** of a fixed length. Blocks are decoded one after another (each "
        "new block sees the finished ones through the KV cache) and the positions *inside* a block are "
        "unmasked in parallel. Block length 1 would be plain autoregression; a longer block gives more "
        "parallelism but harder guesses. The header shows *block b/B · step s/S*.",
        "Try it: block length 8", {"block_length": 8, "steps": 8},
    ),
    Lesson(
        "threshold", "3 · The confidence threshold",
        "The release's policy, `low_confidence_dynamic`: after each forward pass, commit **every** guess "
        "whose confidence is above the threshold; if too few pass, commit the *quota* of most confident "
        "guesses instead. A lower threshold commits more per pass (fewer forwards, faster) and risks "
        "more errors. Watch the *Guess confidence* chart: the dashed line is the threshold.",
        "Try it: threshold 0.5", {"threshold": 0.5},
    ),
    Lesson(
        "steps", "4 · Steps and the quota",
        "*Steps* is the largest number of forwards a block may take. It sets the quota: at least "
        "`block length / steps` positions are committed per pass, so 32 positions in 4 steps means 8 per "
        "pass even when the model is unsure. Low-confidence commits are underlined in the player.",
        "Try it: 4 steps per block", {"steps": 4, "threshold": 0.99},
    ),
    Lesson(
        "strategy", "5 · Remasking strategies",
        "Which masked positions to commit is a policy, separate from the model. `low_confidence_static` "
        "commits exactly the quota of most confident guesses; `random` picks positions at random (the "
        "original masked-diffusion recipe); `left_to_right` forces AR order with the same diffusion "
        "model; `frontier_fallback` keeps the release's threshold but, when nothing passes, commits "
        "next to the text already there instead of the most confident guess anywhere. The "
        "commit-order heatmap below the player shows the order each policy produced.",
        "Try it: random order", {"strategy": "random", "steps": 16},
    ),
    Lesson(
        "ar", "6 · Why autoregression differs",
        "An autoregressive (AR) decoder commits exactly **one token per forward pass**, left to right, "
        "and never revisits it. Diffusion can commit several per pass and sees the right-hand context "
        "while guessing, but spends extra passes on hard positions. The Compare tab runs both on the same "
        "page on one shared clock: count forward passes, or switch the clock to wall time, where each "
        "decoder's prefill (vision encoder + prompt) is shown separately so the comparison is fair.",
        "Try it: compare AR and diffusion", {}, tab="compare",
    ),
]


def settings_for(lesson: Lesson) -> dict:
    return {**DEFAULTS, **lesson.settings}


# The lessons run on the embedded pair whose decoding order is there to watch: the subword pair
# (about 25 denoising steps per block on the sample) when installed. The character pair, the default
# "nano", commits almost every token at its block's first step, so lessons 1-4 would each be over in
# a few forwards (docs/app.md has both pairs' numbers).
LESSON_FAMILIES = ("nano-subword", "nano")


def lesson_model(available: list[str]) -> str:
    """The model spec the lessons set: the first of LESSON_FAMILIES the picker offers."""
    return next((spec for spec in LESSON_FAMILIES if spec in available), available[0] if available else "nano")


READING_GUIDE = """
### Reading the player

* **Header**: *block b/B · step s/S · masks left · committed this step*; the line below says why the
  policy committed what it did at this pass.
* **Token states**: not yet reached (hidden) · masked (a ░ cell) · ghost guess (faded italic: the
  model's current guess, fainter when less sure) · committed this step (black outline) · committed
  earlier (coloured by confidence on the colour-blind-safe cividis ramp). Committed tokens below the
  *Underline below* confidence are underlined, so low confidence is visible without colour. Text
  decoded after the end-of-text token inside its block shows as small grey pips (∙) while its block is open, then is dropped.
* **Hover** a token or a box on the page: the five best candidates at the current step, when it was
  committed, and its guess history (how often the guess changed). **Click** to pin it; the page box
  and the token highlight each other.
* **Clocks**: *forward passes* (one tick per batched forward) or *wall time* (the strip below the
  player shows each decoder's prefill separately).
* Keys: space play/pause, ← → step, Home / End.
"""
