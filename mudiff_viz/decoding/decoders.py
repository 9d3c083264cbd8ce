"""The decoders, by name: what ``--decoder`` and the app's decoder choice select.

A decoder is a :class:`DecodeFn` ``(backend, page, regions, params, progress, snapshot=, **roles) ->
Trace``; a decoder with roles (the speculative decoder's verifier) names the further backends it
needs and the pipeline loads them. Registering one makes it available to the pipeline, the CLI and
the app::

    register_decoder(Decoder("diffusion", "Diffusion", decode_diffusion, backend_kind="diffusion"))
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from mudiff_viz.core.errors import UserInputError
from mudiff_viz.core.trace import Trace
from mudiff_viz.decoding.autoregressive import decode_autoregressive
from mudiff_viz.decoding.diffusion import decode_diffusion
from mudiff_viz.decoding.observers import ProgressFn, Snapshot
from mudiff_viz.decoding.settings import AR, DIFFUSION, SELF_SPEC, SPEC, DecodeParams
from mudiff_viz.decoding.speculative import decode_self_speculative, decode_speculative


class DecodeFn(Protocol):
    """A decoder: the regions of a page through its backend(s) into one Trace. Backends beyond the
    main one come as keywords named by the decoder's roles (``verifier=``)."""

    def __call__(self, backend: Any, page: Any, regions: list, params: DecodeParams, progress: ProgressFn | None = None,
                 *, snapshot: Snapshot | None = None, **roles: Any) -> Trace: ...


@dataclass(frozen=True)
class Decoder:
    name: str
    label: str  # how the app names it
    run: DecodeFn
    backend_kind: str  # the weights its main backend holds ("diffusion" or "ar"): the trace's model
    help: str = ""
    roles: dict[str, str] = field(default_factory=dict)  # further backends by role -> the weights each holds

    @property
    def weights(self) -> tuple[str, ...]:
        """Every kind of weights the decoder runs (what a model family must have installed)."""
        return (self.backend_kind, *self.roles.values())


DECODERS: dict[str, Decoder] = {}


def register_decoder(decoder: Decoder) -> Decoder:
    DECODERS[decoder.name] = decoder
    return decoder


def get_decoder(name: str) -> Decoder:
    if name not in DECODERS:
        raise UserInputError(f"decoder must be one of {', '.join(DECODERS)}, got {name!r}")
    return DECODERS[name]


register_decoder(Decoder(DIFFUSION, "diffusion", decode_diffusion, "diffusion",
                         "block diffusion: denoise a block of masked positions in a few steps"))
register_decoder(Decoder(AR, "AR", decode_autoregressive, "ar", "autoregressive: one token per forward"))
register_decoder(Decoder(SELF_SPEC, "self-speculative", decode_self_speculative, "diffusion",
                         "draft and verify with one diffusion model: its block-length-1 decode, several tokens per forward"))
register_decoder(Decoder(SPEC, "speculative", decode_speculative, "diffusion",
                         "the diffusion model drafts, an AR model verifies: the AR model's decode, fewer forwards",
                         roles={"verifier": "ar"}))
