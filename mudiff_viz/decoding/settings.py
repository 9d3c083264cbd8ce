"""Decode settings in one place: every knob once, with its default, range and help.

The CLI's flags (:func:`mudiff_viz.cli.knobs.add_knob_flags`) and the app's controls are generated
from :data:`KNOBS`; :class:`DecodeParams` takes its defaults from it. The defaults are the
release's (block 32, steps 32, threshold 0.95), except the temperature: 0 is the deterministic mode
(argmax with temperature-1 confidences); the release samples at 1.0.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any, Callable

from models.mineru_common.layout import LAYOUT_RULES
from mudiff_viz.core.errors import UserInputError
from mudiff_viz.core.limits import current
from mudiff_viz.decoding.repetition import RULE_SETS
from mudiff_viz.decoding.strategies import strategy_names

DIFFUSION, AR = "diffusion", "ar"
SELF_SPEC, SPEC = "self-speculative", "speculative"  # the draft-and-verify decoders (decoding/speculative.py)
SPECULATIVE = (SELF_SPEC, SPEC)
ACCEPTANCE = ("exact", "confidence")  # how a draft is accepted (decoding/acceptance.py)
BRANCHES = ("auto", "masks", "runner-up", "last")  # where self-speculation drafts the next drafts (decoding/speculative.py)
MODES = ("page", "layout")  # layout: layout detection first, then recognition per block (two_stage.py)
TASKS = ("text", "table", "formula", "layout")  # the MinerU task prompts (models/mineru_common/tasks.py)
TASK_LIMITS = ("release", "uniform")
NUMERICS = ("auto", "release", "float32")  # docs/real-models.md#bfloat16-numerics


@dataclass(frozen=True)
class Knob:
    name: str
    default: Any
    kind: type  # int, float, str or bool (a bool knob's None: the model's own)
    label: str  # the app's control label
    help: str  # one line: the CLI's help and the app's info
    lo: float | None = None
    hi: float | None = None
    choices: Callable[[], tuple[str, ...]] | None = None
    decoders: tuple[str, ...] = (DIFFUSION, AR, *SPECULATIVE)  # which decoders read it (the trace records only those)
    step: float | None = None  # the app's slider step
    ui_hi: float | None = None  # the app's slider end, when the full range would make the slider useless
    advanced: bool = False  # shown folded away in the app
    # a model knob: the backend attribute it sets for one decode (handed to its encode() by that name);
    # -1 ("auto" for a named choice: Knob.own) is the model's own value, and a model without the
    # attribute refuses any other value
    needs: str | None = None

    @property
    def own(self) -> Any:
        """A model knob's value meaning "the model's own": -1, or "auto" for a named choice."""
        return "auto" if self.kind is str else -1

    def check(self, value: Any) -> None:
        if self.kind is bool:
            if value is not None and not isinstance(value, bool):
                raise UserInputError(f"{self.label.lower()} must be on or off, got {value!r}")
            return
        if self.kind is str:
            names = self.choices() if self.choices else None
            if not isinstance(value, str) or (names and value not in names):
                raise UserInputError(f"unknown {self.label.lower()} {value!r}; choose one of {', '.join(names or ())}")
            return
        if isinstance(value, bool) or not isinstance(value, (int, float)) or (self.kind is int and int(value) != value):
            raise UserInputError(f"{self.label.lower()} must be {'an integer' if self.kind is int else 'a number'}, got {value!r}")
        if math.isnan(value) or (self.lo is not None and value < self.lo) or (self.hi is not None and value > self.hi):
            raise UserInputError(f"{self.label.lower()} must be in {self.lo:g}..{self.hi:g}, got {value:g}")

    def parse(self, text: str) -> Any:
        """One value from its text (a CLI flag's): a bool knob takes on/off, true/false, yes/no, 1/0."""
        if self.kind is not bool:
            return self.kind(text)
        word = text.strip().lower()
        if word in ("on", "true", "yes", "1"):
            return True
        if word in ("off", "false", "no", "0"):
            return False
        raise ValueError(f"{self.label.lower()}: on or off, got {text!r}")

    def values(self, text: str) -> tuple:
        """Comma-separated values of this knob (a sweep's list), each converted and checked as its
        flag is."""
        try:
            values = tuple(self.parse(x.strip()) for x in text.split(",") if x.strip())
        except ValueError:
            raise UserInputError(f"{self.label.lower()}: comma-separated {self.kind.__name__} values, got {text!r}") from None
        for v in values:
            self.check(v)
        return values


KNOBS: list[Knob] = [
    Knob("block_length", 32, int, "Block length", "positions denoised together per block", 1, 1024, decoders=(DIFFUSION,), step=1,
         ui_hi=128),
    Knob("steps", 32, int, "Steps per block", "denoising steps per block (quota per step = block length // steps)",
         1, 4096, decoders=(DIFFUSION,), step=1, ui_hi=128),
    Knob("threshold", 0.95, float, "Threshold", "commit every guess more confident than this (low_confidence_dynamic)",
         0.0, 1.0, decoders=(DIFFUSION,), step=0.01),
    Knob("strategy", "low_confidence_dynamic", str, "Strategy", "which masked positions a step commits",
         choices=strategy_names, decoders=(DIFFUSION,)),
    Knob("temperature", 0.0, float, "Temperature", "0 = deterministic (argmax; confidences from the temperature-1 softmax)",
         0.0, 10.0, step=0.05),
    Knob("top_k", 0, int, "Top-k", "sample from the k most likely tokens (0 = all)", 0, 1_000_000, step=1, ui_hi=200,
         advanced=True),
    Knob("top_p", 1.0, float, "Top-p", "sample from the smallest set of tokens with this much probability", 1e-6, 1.0,
         step=0.01, advanced=True),
    Knob("seed", 0, int, "Seed", "seed of the sampler (temperature > 0, random strategy)", 0, 2**31 - 1, step=1),
    Knob("max_new_tokens", 1024, int, "Max tokens", "tokens per region at most", 1, 1_000_000, step=1, ui_hi=4096),
    Knob("mode", "page", str, "Mode", "page: the model's own regions (nano: text blocks; MinerU: the whole page with "
         "the task's prompt); layout: layout detection, then each block with its type's prompt (MinerU models only: "
         "the nano pairs were never taught a layout prompt)", choices=lambda: MODES),
    Knob("task", "text", str, "Task", "page mode: the prompt the whole page is read with (text, table, formula or "
         "layout; MinerU models only, the nano pairs read text)", choices=lambda: TASKS),
    Knob("task_limits", "release", str, "Tokens per task", "layout mode: max tokens caps every pass; release = each task "
         "also within its model's shipped limit (MinerU-Diffusion's release: layout and tables 2048, text and formulas "
         "1024; MinerU2.5's client: none); uniform = max tokens for every pass", choices=lambda: TASK_LIMITS,
         advanced=True),
    Knob("layout_rules", "mineru-vl-utils", str, "Layout rules", "layout mode: how the layout answer becomes blocks "
         "and the page document; mineru-vl-utils = MinerU2.5's client 2.0.7; release = MinerU-Diffusion's end-to-end "
         "script (no duplicate or nesting rules, paratext left out of the document)", choices=lambda: LAYOUT_RULES,
         advanced=True),
    Knob("repetition", "auto", str, "Repetition rules",
         "AR: n-gram blocking and penalties; auto = the model's own client settings (MinerU2.5: "
         "client-hf, no_repeat_ngram_size 100), off, client-hf, client-vllm (plus its presence and "
         "frequency penalties per task) or custom (the four knobs below)",
         choices=lambda: RULE_SETS, decoders=(AR,)),
    Knob("no_repeat_ngram_size", 0, int, "No-repeat n-gram", "custom rules: ban a token that would complete an "
         "n-gram already in the prompt or answer (0 = off)", 0, 100_000, decoders=(AR,), step=1, ui_hi=200,
         advanced=True),
    Knob("repetition_penalty", 1.0, float, "Repetition penalty", "custom rules: logits of tokens seen in the prompt "
         "or answer divided by this (multiplied when negative); 1 = off", 0.01, 10.0, decoders=(AR,), step=0.01,
         ui_hi=2.0, advanced=True),
    Knob("presence_penalty", 0.0, float, "Presence penalty", "custom rules: subtracted from the logit of every token "
         "the answer holds (vLLM's rule)", -2.0, 2.0, decoders=(AR,), step=0.05, advanced=True),
    Knob("frequency_penalty", 0.0, float, "Frequency penalty", "custom rules: subtracted once per occurrence in the "
         "answer (vLLM's rule)", -2.0, 2.0, decoders=(AR,), step=0.005, advanced=True),
    Knob("draft_length", 0, int, "Draft length", "positions drafted past the frontier, verified in the next forward "
         "(0 = the model's own: 8 for the character pair and MinerU-Diffusion, 4 for the subword pair)",
         0, 64, decoders=SPECULATIVE, step=1, ui_hi=32),
    Knob("acceptance", "exact", str, "Acceptance", "exact: keep a draft only where the verifier agrees (lossless); "
         "confidence: also keep a draft whose own confidence is at least the acceptance threshold (lossy)",
         choices=lambda: ACCEPTANCE, decoders=SPECULATIVE),
    Knob("draft_branches", "auto", str, "Draft branches", "auto = the model's own (last for the character pair, "
         "masks for the subword pair and MinerU-Diffusion); masks = the next drafts come from a "
         "block of masks after each verify query; runner-up = also a block after each draft's runner-up token, used "
         "when the verifier's correction is that token (drafts made knowing it: more are kept, the forward is wider); "
         "last = one block, after the last draft, used only when every draft is kept (the narrowest forward: for a "
         "model whose drafts are mostly kept)",
         choices=lambda: BRANCHES, decoders=(SELF_SPEC,), advanced=True),
    Knob("draft_floor", 0.1, float, "Draft floor", "drop the drafts past where the product of "
         "their confidences falls below this (0 = keep all draft-length of them): a narrower forward when the "
         "drafter doubts its later drafts", 0.0, 1.0, decoders=SPECULATIVE, step=0.01, advanced=True),
    Knob("accept_threshold", 0.9, float, "Acceptance threshold", "the lossy rule keeps drafts at least this confident",
         0.0, 1.0, decoders=SPECULATIVE, step=0.01, advanced=True),
    Knob("anchor_reach", -1, int, "Glyph anchoring", "nano pairs: after each commit, put the reading position back "
         "on the glyphs the CTC head reads next, searching this many characters either side of the counted column "
         "(0 = off: count characters only; -1 = the model's own, 3)", -1, 16, step=1, advanced=True,
         needs="anchor_reach"),
    Knob("numerics", "auto", str, "Numerics", "MinerU-Diffusion: release = RoPE and probabilities in the model's "
         "dtype (bfloat16 on a GPU), as the release computes them; float32 = both in float32; auto = release on a "
         "bfloat16 model, float32 otherwise (a CPU runs float32)", choices=lambda: NUMERICS, advanced=True,
         needs="numerics"),
    Knob("verifier", "", str, "Verifier", "the AR model that verifies (empty: the model's own AR twin)",
         decoders=(SPEC,), advanced=True),
    Knob("straighten", None, bool, "Straighten scans", "turn a scan's skew back and even its lighting before "
         "decoding (pages without a text layer); unset = the model's own: on for the nano pairs, off for the "
         "MinerU models (their release and client do not)", advanced=True),
    Knob("preset", "defaults", str, "Preset", "the named settings the other knobs started from; under release each "
         "model runs as shipped: MinerU-Diffusion with the release's demo, an AR model with its own client's "
         "settings (MinerU2.5: greedy, its n-gram rule, no token cap below the limits)",
         choices=lambda: tuple(PRESETS), advanced=True),
]
KNOB = {k.name: k for k in KNOBS}


# Named sets of knob values (docs/real-models.md#release-settings-and-our-defaults). "release" is
# the MinerU-Diffusion release's demo: it samples at temperature 1.0 and lets a region run to 4096
# tokens; our defaults differ only there (temperature 0, the deterministic mode, and 1024 tokens).
PRESETS: dict[str, dict[str, Any]] = {
    "defaults": {},
    "release": {"temperature": 1.0, "block_length": 32, "steps": 32, "threshold": 0.95,
                "strategy": "low_confidence_dynamic", "top_k": 0, "top_p": 1.0, "max_new_tokens": 4096,
                "repetition": "auto"},
}
# What a preset means for other weights than the diffusion model's: "release" for an AR model is
# MinerU2.5's own client (mineru-vl-utils 2.0.x: greedy, top_k 1; no max_new_tokens, so generate
# stops only at the model's context): temperature 0 and the most tokens the limits allow (None).
PRESET_BY_KIND: dict[str, dict[str, dict[str, Any]]] = {
    "release": {AR: {"temperature": 0.0, "max_new_tokens": None}},
}


def preset_knobs(preset: str | None, knobs: dict[str, Any] | None = None, max_new_tokens_limit: int | None = None
                 ) -> dict[str, Any]:
    """Every knob's value: the ones given (not None) win over the preset's, the preset's over the
    defaults. The preset's token limit is cut to ``max_new_tokens_limit`` (the limits in force)."""
    name = preset or "defaults"
    if name not in PRESETS:
        raise UserInputError(f"unknown preset {name!r}; choose one of {', '.join(PRESETS)}")
    values = {k.name: k.default for k in KNOBS}
    values.update(PRESETS[name], preset=name)
    if max_new_tokens_limit is not None and "max_new_tokens" in PRESETS[name]:
        values["max_new_tokens"] = min(values["max_new_tokens"], max_new_tokens_limit)
    values.update({k: v for k, v in (knobs or {}).items() if v is not None})
    return values


def register_knob(knob: Knob) -> Knob:
    """Add a decode knob: it becomes a CLI flag, a control in the app's Decode tab (generated from
    :data:`KNOBS` when the app is built), a :class:`DecodeParams` value and a key of the trace's
    params, with no other edit. A policy or processor reads it as ``params.<name>``."""
    if knob.name in KNOB:
        raise ValueError(f"knob {knob.name!r} exists")
    KNOBS.append(knob)
    KNOB[knob.name] = knob
    return knob


def unregister_knob(name: str) -> None:
    KNOBS.remove(KNOB.pop(name))


@dataclass
class DecodeParams:
    """One decode's settings. Every decoder takes the same object and reads the knobs it needs."""

    block_length: int = KNOB["block_length"].default
    steps: int = KNOB["steps"].default
    threshold: float = KNOB["threshold"].default
    strategy: str = KNOB["strategy"].default
    temperature: float = KNOB["temperature"].default
    top_k: int = KNOB["top_k"].default
    top_p: float = KNOB["top_p"].default
    seed: int = KNOB["seed"].default
    max_new_tokens: int = KNOB["max_new_tokens"].default
    record: bool = True  # record every step (off: tokens, commit forwards and metrics only)
    fused: bool = False  # diffusion: no host round trip per denoising step (same result; decoding/diffusion.py)
    max_seconds: float | None = None  # wall-time budget of the decode
    token_limit: int | None = None  # the most tokens per region the limits in force allow (make_params sets it)
    extra: dict[str, Any] = field(default_factory=dict)  # recorded in the trace as is (mode, probes ...)

    more: dict[str, Any] = field(default_factory=dict)  # values of knobs registered beyond the fields above

    def __getattr__(self, name: str) -> Any:
        """A registered knob without a field of its own: its value, or its default."""
        if name != "more" and name in KNOB:
            return self.more.get(name, KNOB[name].default)
        raise AttributeError(name)

    def check(self) -> None:
        for knob in KNOBS:
            knob.check(getattr(self, knob.name))

    def knobs(self) -> dict[str, Any]:
        """Every knob's value, by name (what the CLI, the app and the API pass around)."""
        return {k.name: getattr(self, k.name) for k in KNOBS}

    def for_trace(self, decoder: str, backend: Any) -> dict[str, Any]:
        """The params record of a trace: the knobs this decoder reads (model knobs only where
        ``backend`` has them), plus record and extras."""
        knobs = {k.name: getattr(self, k.name) for k in KNOBS
                 if decoder in k.decoders and (not k.needs or hasattr(backend, k.needs))}
        return {"decoder": decoder, **knobs, "record": self.record, **self.extra}

    @classmethod
    def from_knobs(cls, **knobs: Any) -> "DecodeParams":
        """From keyword knobs (unknown names and None values are ignored), checked."""
        names = {f.name for f in fields(cls)} - {"more"}
        given = {k: v for k, v in knobs.items() if v is not None}
        params = cls(**{k: v for k, v in given.items() if k in names},
                     more={k: v for k, v in given.items() if k in KNOB and k not in names})
        params.check()
        return params

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def for_weights(params: DecodeParams, kind: str) -> tuple[DecodeParams, dict[str, Any]]:
    """``params`` as the preset means them for weights of ``kind`` (:data:`PRESET_BY_KIND`): a
    knob still at the preset's own value takes this kind's (None: the token limit in force); a
    knob set to anything else stays as set. Returns the params and what changed (the trace records it)."""
    own = PRESET_BY_KIND.get(params.preset, {}).get(kind, {})
    shared = dict(PRESETS.get(params.preset, {}))
    if params.token_limit is not None and "max_new_tokens" in shared:
        shared["max_new_tokens"] = min(shared["max_new_tokens"], params.token_limit)
    changed = {}
    for name, value in own.items():
        if name == "max_new_tokens" and value is None:
            value = params.token_limit or current().max_new_tokens
        if getattr(params, name) == shared.get(name, KNOB[name].default) and getattr(params, name) != value:
            changed[name] = value
    if not changed:
        return params, {}
    fielded = {k: v for k, v in changed.items() if k in {f.name for f in fields(DecodeParams)}}
    more = {k: v for k, v in changed.items() if k not in fielded}
    return replace(params, **fielded, more={**params.more, **more}), changed


def with_model_knobs(params: DecodeParams, *backends: Any) -> DecodeParams:
    """``params`` with each model knob (:attr:`Knob.needs`) resolved against the first backend:
    -1 becomes that backend's own value, so that the trace records what ran. A value other than -1
    for a backend without the attribute is refused (the knob would do nothing there)."""
    own = {}
    for knob in KNOBS:
        if not knob.needs:
            continue
        value = getattr(params, knob.name)
        lacking = [b.name for b in backends if not hasattr(b, knob.needs)]
        if lacking and value != knob.own:
            raise UserInputError(f"{lacking[0]} has no {knob.label.lower()}: leave it at {knob.own} (the model's own)")
        if value == knob.own and not lacking:
            own[knob.name] = getattr(backends[0], knob.needs)
    return replace(params, more={**params.more, **own}) if own else params


def model_options(params: DecodeParams, backend: Any) -> dict[str, Any]:
    """The keywords of ``backend.encode`` for the model knobs it has (their values resolved: -1 is
    left out, the backend then uses its own)."""
    return {k.needs: getattr(params, k.name) for k in KNOBS
            if k.needs and hasattr(backend, k.needs) and getattr(params, k.name) != k.own}
