"""The lessons' recorded runs: each lesson opens on traces shipped in assets/lessons/, so its first
frame needs no model; *Rerun live* decodes the same run again.

One file per distinct run (pair, decoder, changed settings), gzipped trace JSON, shared by the
lessons that use the same run. ``scripts/record_lessons.py`` writes them from the current models;
``tests/test_lesson_recordings.py`` checks that each still equals a live decode (greedy: the same
tokens), so a retrained model cannot leave stale recordings behind.
"""

from __future__ import annotations

import functools
import gzip
from pathlib import Path

from mudiff_viz.core.trace import Trace
from mudiff_viz.decoding.settings import KNOB
from mudiff_viz.notebook import api
from mudiff_viz.ui import howitworks, models, pagework
from mudiff_viz.ui.common import default_sample

ROOT = Path(__file__).resolve().parents[2]
LESSONS_DIR = ROOT / "assets" / "lessons"


def run_key(run: howitworks.Run) -> str:
    """The recording's name: pair, decoder and the settings the run changes (sorted), file-name safe."""
    parts = [run.family, run.decoder] + [f"{k}-{v}" for k, v in sorted(run.settings.items())]
    return ".".join(str(p).replace("_", "-").replace("/", "-") for p in parts)


def recording_path(run: howitworks.Run, folder: Path | None = None) -> Path:
    return (folder or LESSONS_DIR) / f"{run_key(run)}.json.gz"


def distinct_runs() -> list[howitworks.Run]:
    """Every run of every lesson once (lessons share runs: the character pair's default decode is in three)."""
    seen: dict[str, howitworks.Run] = {}
    for lesson in howitworks.LESSONS:
        for run in lesson.runs:
            seen.setdefault(run_key(run), run)
    return list(seen.values())


def lesson_page():
    """The page every lesson decodes: the bundled sample at the app's decode DPI (cached)."""
    return pagework.load(default_sample(), 1)


def run_knobs(run: howitworks.Run) -> dict:
    return {k: v for k, v in howitworks.run_settings(run).items() if k in KNOB}


def decode_run(run: howitworks.Run, spec: str | None = None, page=None, snapshot=None, record: bool = True) -> Trace:
    """One live decode of a lesson's run, as the tab's *Rerun live* does it (``spec``: the model that
    stands in when the run's pair is not installed)."""
    spec = spec or run.family
    models.check(spec, run.decoder)
    return api.decode(page or lesson_page(), model=spec, decoder=run.decoder, snapshot=snapshot,
                      record=record, **run_knobs(run))


def save_recording(trace: Trace, run: howitworks.Run, folder: Path | None = None) -> int:
    """Write the run's recording (gzipped compact JSON); returns its size in bytes."""
    path = recording_path(run, folder)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = gzip.compress(trace.to_json().encode(), compresslevel=9, mtime=0)
    path.write_bytes(data)
    return len(data)


@functools.lru_cache(maxsize=32)
def _load(path: str, mtime_ns: int) -> Trace:
    return Trace.loads(gzip.decompress(Path(path).read_bytes()))


def load_recording(run: howitworks.Run, folder: Path | None = None) -> Trace | None:
    """The run's shipped recording, or None when it is not there (then only *Rerun live* can show it)."""
    path = recording_path(run, folder)
    if not path.is_file():
        return None
    return _load(str(path), path.stat().st_mtime_ns)
