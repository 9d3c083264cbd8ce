"""Issue 48: README.md and docs/app.md quote the lessons' figures from the shipped recordings.

The README once said lesson 7 read at "2.67 tokens per forward, 1.5% CER" while the app showed 2.58
and 1.1%. ``scripts/readme_figures.py`` writes those blocks from assets/lessons/; here the blocks in
the repository must equal what it computes, so a re-recording that changes a figure fails until the
script is rerun.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mudiff_viz.core.trace import ACCEPTED
from mudiff_viz.ui import howitworks, lesson_docs, lesson_recordings

ROOT = Path(__file__).resolve().parent.parent


def recorded(key: str):
    lesson = next(x for x in howitworks.LESSONS if x.key == key)
    return [lesson_recordings.load_recording(r) for r in lesson.runs]


def block(path: Path, name: str) -> str:
    start, end = lesson_docs.marker(name)
    text = path.read_text(encoding="utf-8")
    return text[text.index(start) + len(start):text.index(end)]


def test_readme_and_app_doc_figures_equal_the_recordings():
    assert lesson_docs.stale() == [], "run python scripts/readme_figures.py"


def test_the_readme_quotes_lesson_7_and_8_as_their_recordings_ran():
    """Independently of the generator: the figures read straight off the traces."""
    _, self_spec = recorded("pairs")
    ar, spec, self_spec8 = recorded("drafts")
    text = " ".join(block(ROOT / "README.md", "lesson-figures").split())
    assert f"{self_spec.metrics.tokens_per_forward:.2f} tokens per forward, {100 * self_spec.metrics.cer:.1f}% CER" in text
    assert f"drafts up to {self_spec.params['draft_length']} tokens" in text
    assert f"AR twin ({ar.clock_length} passes), speculative ({spec.clock_length}) and self-speculative " \
           f"({self_spec8.clock_length})" in text
    table = block(ROOT / "docs" / "app.md", "lesson-table")
    assert f"| {self_spec.clock_length} | {self_spec.metrics.tokens_per_forward:.2f} |" in table
    drafts = " ".join(block(ROOT / "docs" / "app.md", "lesson-drafts").split())
    # accepted as the player's header counts them: the recorded verdicts (the decoder's own metrics also count
    # drafts later cut at the stop token)
    accepted = sum(v == ACCEPTED for s in spec.steps for v in (s.verdicts or ()))
    assert f"Speculative: {spec.metrics.drafted} drafts, {accepted} accepted" in drafts


def test_the_script_rewrites_a_drifted_figure_and_check_fails_until_then(tmp_path):
    for rel in lesson_docs.BLOCKS:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / rel, tmp_path / rel)
    readme = tmp_path / "README.md"
    tps = f"{recorded('pairs')[1].metrics.tokens_per_forward:.2f} tokens per forward"
    readme.write_text(readme.read_text(encoding="utf-8").replace(tps, "2.67 tokens per forward"), encoding="utf-8")
    assert lesson_docs.stale(tmp_path) == ["README.md"]
    assert lesson_docs.stale(tmp_path, write=True) == ["README.md"]
    assert lesson_docs.stale(tmp_path) == [] and tps in readme.read_text(encoding="utf-8")
    assert readme.read_text(encoding="utf-8") == (ROOT / "README.md").read_text(encoding="utf-8")


def test_the_script_checks_in_one_line():
    ok = subprocess.run([sys.executable, "scripts/readme_figures.py", "--check"], cwd=ROOT, capture_output=True,
                        text=True, timeout=300)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "equals the recordings" in ok.stdout


def test_a_missing_marker_is_an_error_not_a_silent_skip():
    with pytest.raises(ValueError, match="lesson-table"):
        lesson_docs.fill("no markers here", {"lesson-table": "x"})
