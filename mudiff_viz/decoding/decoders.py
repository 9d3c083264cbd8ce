"""The decoders, by name: what ``--decoder`` and the app's decoder choice select.

A decoder is a function ``(backend, page, regions, params, progress) -> Trace``. Registering one
makes it available to the pipeline, the CLI and the app::

    register_decoder(Decoder("diffusion", "Diffusion", decode_diffusion, backend_kind="diffusion"))
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from mudiff_viz.core.errors import UserInputError
from mudiff_viz.decoding.autoregressive import decode_autoregressive
from mudiff_viz.decoding.diffusion import decode_diffusion

DecodeFn = Callable  # (backend, page, regions, params: DecodeParams, progress) -> Trace


@dataclass(frozen=True)
class Decoder:
    name: str
    label: str  # how the app names it
    run: DecodeFn
    backend_kind: str  # the backends it runs on ("diffusion" or "ar" weights)
    help: str = ""


DECODERS: dict[str, Decoder] = {}


def register_decoder(decoder: Decoder) -> Decoder:
    DECODERS[decoder.name] = decoder
    return decoder


def get_decoder(name: str) -> Decoder:
    if name not in DECODERS:
        raise UserInputError(f"decoder must be one of {', '.join(DECODERS)}, got {name!r}")
    return DECODERS[name]


register_decoder(Decoder("diffusion", "diffusion", decode_diffusion, "diffusion",
                         "block diffusion: denoise a block of masked positions in a few steps"))
register_decoder(Decoder("ar", "AR", decode_autoregressive, "ar", "autoregressive: one token per forward"))
