"""The docs hold together: every relative link in README.md and docs/**/*.md reaches a file (and,
for a Markdown target, its heading), docs/ keeps prose at the top and raw results under
docs/results/, and docs/results/README.md indexes every file there."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HTML_LINK = re.compile(r"<(?:img|a)\b[^>]*?\b(?:src|href)=\"([^\"]+)\"", re.IGNORECASE)


def prose(text: str) -> str:
    """The text outside fenced code blocks and inline code spans (links there are examples)."""
    text = re.sub(r"^(```|~~~).*?^\1", "", text, flags=re.MULTILINE | re.DOTALL)
    return re.sub(r"(`+)(?:(?!\1).)+?\1", "", text)


def anchors(page: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens, repeats numbered."""
    seen: dict[str, int] = {}
    out = set()
    for line in prose(page.read_text(encoding="utf-8")).splitlines():
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        slug = re.sub(r"[^\w\- ]", "", m[1].strip().lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def relative_links(page: Path) -> list[str]:
    text = page.read_text(encoding="utf-8")
    found = LINK.findall(prose(text)) + HTML_LINK.findall(prose(text))
    return [t for t in found if not re.match(r"^[a-z][a-z0-9+.-]*:", t, re.IGNORECASE)]


def broken_links(page: Path) -> list[str]:
    bad = []
    for target in relative_links(page):
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            bad.append(f"{target} (no such file)")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            bad.append(f"{target} (no such heading)")
    return bad


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_every_relative_link_resolves(page):
    assert broken_links(page) == []


def test_the_link_check_sees_links_and_refuses_broken_ones(tmp_path):
    (tmp_path / "a.md").write_text("# Title here\n\n## Second: part (two)\n")
    page = tmp_path / "b.md"
    page.write_text("[ok](a.md) [ok](a.md#second-part-two) ![img](a.md) [web](https://x.invalid/y)\n"
                    "`[code](nowhere.md)`\n```\n[block](nowhere.md)\n```\n"
                    "[gone](results/gone.json) [bad anchor](a.md#nope) <img src=\"missing.png\">\n")
    assert len(relative_links(page)) == 6
    assert broken_links(page) == ["results/gone.json (no such file)", "a.md#nope (no such heading)",
                                  "missing.png (no such file)"]


def test_docs_top_level_is_prose():
    """Raw evaluation output belongs in docs/results/ (with its index), not beside the prose."""
    allowed_dirs = {"figures", "screenshots", "results"}
    for entry in (ROOT / "docs").iterdir():
        assert entry.suffix == ".md" or (entry.is_dir() and entry.name in allowed_dirs), entry.name


def test_the_results_index_lists_every_file():
    results = ROOT / "docs" / "results"
    listed = {(results / t.partition("#")[0]).resolve() for t in relative_links(results / "README.md")}
    for f in sorted(results.rglob("*")):
        if f.is_file() and f.name != "README.md":
            assert f.resolve() in listed, f"{f.relative_to(ROOT)} is not linked from docs/results/README.md"


NUMBER_WORDS = ("zero one two three four five six seven eight nine ten eleven twelve").split()


def test_the_readme_counts_the_lessons_and_tabs_the_app_has():
    """The README's "How it works (N short lessons" and "N tabs" say what the app builds."""
    from mudiff_viz.ui.howitworks import LESSONS

    text = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    said = re.search(r"How it works\*\* \((\w+) short lessons", text)
    assert said and said[1] == NUMBER_WORDS[len(LESSONS)], (said and said[1], len(LESSONS))
    app = (ROOT / "mudiff_viz" / "ui" / "app.py").read_text(encoding="utf-8")
    tabs = len(re.findall(r"gr\.Tab\(", app))
    assert f"{NUMBER_WORDS[tabs].capitalize()} tabs:" in text, tabs
