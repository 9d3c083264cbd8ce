"""What every sub-command shares: one-line errors, exit codes, limit flags and the decode knobs.

The decode knob flags are generated from :data:`mudiff_viz.decoding.settings.KNOBS` (defaults,
ranges, help and the registered strategies come from there).
"""

from __future__ import annotations

import argparse
import sys

from mudiff_viz.core.counts import trace_counts
from mudiff_viz.core.limits import Limits, current
from mudiff_viz.decoding.settings import KNOBS, PRESETS, preset_knobs
from mudiff_viz.views.tables import graphs_stated

EXIT_OK, EXIT_INTERNAL, EXIT_INPUT, EXIT_MODEL = 0, 1, 2, 3


class OneLineParser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit code 2
        print(f"error: {message}", file=sys.stderr)
        raise SystemExit(EXIT_INPUT)


def add_knob_flags(p: argparse.ArgumentParser) -> None:
    """``--block-length``, ``--steps``, ... one flag per decode knob, and ``--preset`` (a named set
    of knob values under the flags given)."""
    p.add_argument("--preset", choices=tuple(PRESETS), default="defaults",
                   help="release: each model as shipped: MinerU-Diffusion with the release's demo settings "
                        "(temperature 1.0, block 32, steps 32, threshold 0.95, 4096 tokens), an AR model with its "
                        "own client's (MinerU2.5: greedy, its 100-gram rule, no cap below the limits); flags given "
                        "as well win (default: our defaults)")
    for knob in KNOBS:
        if knob.name == "preset":  # the flag above
            continue
        choices = knob.choices() if knob.choices else None
        default = "the model's own" if knob.kind is bool and knob.default is None else knob.default
        p.add_argument(f"--{knob.name.replace('_', '-')}", type=knob.parse if knob.kind is bool else knob.kind,
                       default=None, choices=choices, metavar="{on,off}" if knob.kind is bool else None,
                       help=f"{knob.help} (default {default})")


def knobs_from(args) -> dict:
    """Every knob's value: the flag's when given, else the preset's, else its default."""
    given = {knob.name: getattr(args, knob.name, None) for knob in KNOBS}
    return preset_knobs(getattr(args, "preset", None), given, current().max_new_tokens)


def add_limit_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--max-upload-mb", type=float, help="largest input file (MB)")
    p.add_argument("--max-pages", type=int, help="largest PDF page count")
    p.add_argument("--max-decode-seconds", type=float, help="wall-time limit per decode")


def limits_from(args) -> Limits:
    return current(
        max_upload_bytes=int(args.max_upload_mb * 1024 * 1024) if getattr(args, "max_upload_mb", None) else None,
        max_pdf_pages=getattr(args, "max_pages", None),
        max_decode_seconds=getattr(args, "max_decode_seconds", None),
    )


def summary_line(trace) -> str:
    """One line of a decode's counts (core/counts.py, the numbers the app shows) and times."""
    m, c = trace.metrics, trace_counts(trace)
    parts = [
        f"{trace.decoder}",
        f"model={trace.model.name}",
        f"regions={c.regions}",
        f"tokens={c.tokens}",
        f"forwards={c.forwards}",
        f"NFE={c.nfe}",
        f"tokens/forward={c.tokens_per_forward:.2f}",
        f"wall={m.wall_s}s (prefill {m.prefill_s}s)",
    ]
    if graphs_stated(trace):
        parts.append(f"cuda-graphs={trace.params['cuda_graphs']}")
    if trace.page.skew is not None:
        parts.append(f"skew={trace.page.skew.angle:+.1f}deg")
        if trace.page.skew.relit:
            parts.append(f"relit={trace.page.skew.relit:.1f}")
    elif trace.params.get("straighten") is False:
        parts.append("straighten=off")
    if m.cer is not None:
        parts.append(f"CER={100 * m.cer:.2f}%")
    if m.truncated:
        parts.append(f"TRUNCATED ({m.truncated})")
    return " ".join(parts)


def order_line(trace) -> str | None:
    """Decoding order in one line (block-wise traces with recorded steps), plus occlusion recovery."""
    from mudiff_viz.core.order import order_summary

    s = order_summary([trace])
    if not s["tokens"]:
        return None
    fmt = lambda v, pct=True: "-" if v is None else (f"{100 * v:.1f}%" if pct else f"{v:.2f}")  # noqa: E731
    parts = [f"order: first-step commits {fmt(s['first_step_share'])}",
             f"step vs position rho={fmt(s['step_vs_position'], False)}",
             f"step vs confidence rho={fmt(s['step_vs_confidence'], False)}"]
    if s["occluded_words"]:
        parts += [f"occluded words recovered {s['recovered_words']}/{s['occluded_words']}",
                  f"CER on the rest {fmt(s['cer_rest'])}",
                  f"occluded tokens at their block's last step {fmt(s['occluded_last_step_share'])} "
                  f"(others {fmt(s['other_last_step_share'])})"]
    return " · ".join(parts)
