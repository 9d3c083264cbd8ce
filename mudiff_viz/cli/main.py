"""``python -m mudiff_viz``: decode pages into traces, inspect traces, shuffle, benchmark.

Errors are one line on stderr. Exit codes: 0 ok, 1 internal failure, 2 bad input, 3 model could
not be loaded. Each sub-command lives in its own module and registers itself here.
"""

from __future__ import annotations

import argparse
import os
import sys

from mudiff_viz.cli import bench, corpus, decode, loadtest, release, shuffle
from mudiff_viz.cli.common import EXIT_INPUT, EXIT_INTERNAL, EXIT_MODEL, OneLineParser
from mudiff_viz.core.errors import ModelLoadError, UserInputError

COMMANDS = (decode, shuffle, bench, corpus, loadtest, release)


def build_parser() -> argparse.ArgumentParser:
    ap = OneLineParser(prog="python -m mudiff_viz", description="Look inside diffusion decoding of document OCR.")
    sub = ap.add_subparsers(dest="cmd", required=True, parser_class=OneLineParser)
    for command in COMMANDS:
        command.register(sub)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except UserInputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_INPUT
    except ModelLoadError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_MODEL
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return EXIT_INTERNAL
    except Exception as exc:  # the last line of defence: one line, never a traceback
        msg = str(exc).splitlines()[0] if str(exc) else ""
        print(f"error: internal failure: {type(exc).__name__}: {msg}", file=sys.stderr)
        if os.environ.get("MUDIFF_DEBUG"):
            raise
        return EXIT_INTERNAL
