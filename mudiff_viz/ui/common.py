"""What every tab's callbacks share: one-line errors, file paths, bundled samples, download folders."""

from __future__ import annotations

import functools
import html
import inspect
import logging
import re
from pathlib import Path
from typing import Callable

import gradio as gr

from mudiff_viz.core.errors import ModelLoadError, UserInputError
from mudiff_viz.core.trace import Trace
from mudiff_viz.ui.disk import new_folder

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "assets" / "samples"
LOG = logging.getLogger("mudiff_viz.ui")
TRACES = ROOT / "assets" / "traces"
PAGE_TYPES = [".pdf", ".png", ".jpg", ".jpeg"]


def error_text(message: str) -> str:
    """A message as gr.Error shows it: Gradio's toast renders HTML (sanitised, but an <img> from a
    trace's field would still load), and messages can quote an upload (a trace's key or value), so
    &, < and > are escaped; the toast then reads exactly like the CLI's line."""
    return html.escape(message, quote=False)


def one_line(exc: BaseException) -> str:
    """The project's one-line message for an exception (internal failures named as such)."""
    if isinstance(exc, (UserInputError, ModelLoadError)):
        return str(exc)
    if isinstance(exc, gr.Error):  # already one line (ours, or spaces' across its boundary), escaped for the toast
        title, msg = getattr(exc, "title", "Error"), html.unescape(str(exc.message))
        return f"{title}: {msg}" if title and title != "Error" else msg  # "ZeroGPU worker error: OutOfMemoryError"
    msg = str(exc).splitlines()[0] if str(exc) else ""
    return f"internal failure: {type(exc).__name__}: {msg}"


def user_errors(fn: Callable) -> Callable:
    """Turn the project's one-line errors into gr.Error; anything else into a short internal message.
    Works for plain callbacks and for generators (streamed results)."""

    def convert(exc: Exception) -> gr.Error:
        """A user error is one line in the server log, with no traceback; anything else keeps its
        traceback there (Gradio prints it), and the visitor reads one line either way."""
        user = isinstance(exc, (UserInputError, ModelLoadError))
        if user:
            LOG.warning("user error in %s: %s", fn.__name__, one_line(exc))
        return gr.Error(error_text(one_line(exc)), print_exception=not user)

    if inspect.isgeneratorfunction(fn):

        @functools.wraps(fn)
        def gen_wrapper(*args, **kwargs):
            try:
                yield from fn(*args, **kwargs)
            except gr.Error:
                raise
            except (UserInputError, ModelLoadError) as exc:
                raise convert(exc) from None
            except Exception as exc:  # one line, never a traceback in the UI
                raise convert(exc) from exc

        return gen_wrapper

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except gr.Error:
            raise
        except (UserInputError, ModelLoadError) as exc:
            raise convert(exc) from None
        except Exception as exc:
            raise convert(exc) from exc

    return wrapper


def file_path(file) -> str | None:
    """The server-side path of whatever a gr.File hands a callback (path, FileData, dict, list)."""
    if file is None:
        return None
    if isinstance(file, (list, tuple)):
        return file_path(file[0]) if file else None
    return getattr(file, "name", None) or (file.get("path") if isinstance(file, dict) else str(file))


def sample_paths() -> list[str]:
    return sorted(str(p) for p in SAMPLES.glob("*") if p.suffix.lower() in PAGE_TYPES)


def default_sample() -> str | None:
    preferred = SAMPLES / "courier-short.pdf"
    if preferred.is_file():
        return str(preferred)
    paths = sample_paths()
    return paths[0] if paths else None


def example_traces() -> dict[str, list[str]]:
    """Bundled traces: {'diffusion': [...], 'ar': [...]} by file name (*.diffusion.json, *.ar.json)."""
    out: dict[str, list[str]] = {"diffusion": [], "ar": []}
    for p in sorted(TRACES.glob("*.json")):
        for kind in out:
            if p.name.endswith(f".{kind}.json"):
                out[kind].append(str(p))
    return out


def safe_stem(name: str | None) -> str:
    stem = Path(name or "page").stem
    return re.sub(r"[^A-Za-z0-9._-]+", "_", stem)[:60] or "page"


def request_dir() -> Path:
    """A fresh folder for one request's downloads, in the app's budgeted folder (``ui/disk.py``: old
    and, past the cap, oldest entries pruned first)."""
    return new_folder("req-")


def write_trace(trace: Trace, outdir: Path, stem: str) -> str:
    path = outdir / f"{stem}.{trace.decoder}.trace.json"
    trace.save(path)
    return str(path)


def write_text(text: str, outdir: Path, name: str) -> str:
    path = outdir / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def whole_count(value, name: str, default: int, most: int) -> int:
    """A count control's value (rounds, seeds) as an int from 1 to ``most``; empty is ``default``; a bad
    value is one line."""
    try:
        n = int(value if value not in (None, "") else default)
    except (TypeError, ValueError):
        raise UserInputError(f"{name} must be a whole number from 1 to {most}, got {value!r}") from None
    if not 1 <= n <= most:
        raise UserInputError(f"{name} must be from 1 to {most}, got {n}")
    return n
