"""Optional extras (issue 38): the app and the CLI run without the corpus and notebook packages, and
a feature that needs a missing one says which extra to install, in one line. Each check runs in a
fresh interpreter where the packages cannot be imported (``sys.modules[name] = None`` makes
``import name`` fail as it does when the package is absent)."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BLOCK = "import sys\nfor m in {mods!r}: sys.modules[m] = None\n"


def run_without(mods: tuple[str, ...], code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", BLOCK.format(mods=mods) + code], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, env={"PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1",
                                                       "GRADIO_ANALYTICS_ENABLED": "False", "PYTHONPATH": str(ROOT)})


def test_the_app_builds_without_the_extras_and_the_corpus_tab_names_its_extra():
    r = run_without(("ray", "duckdb", "pyarrow", "anywidget"), """
from mudiff_viz.ui.app import build_app
from mudiff_viz.ui import corpus_tab
build_app()
try:
    corpus_tab.open_corpus("assets/corpus", None, None)
except Exception as exc:
    print("ERROR", getattr(exc, "message", exc))
print("LOADED", sorted(m for m in ("ray", "duckdb", "pyarrow", "anywidget") if sys.modules.get(m)))
""")
    assert r.returncode == 0, r.stderr[-2000:]
    assert "ERROR The Corpus tab: the corpus store needs pyarrow, which is not installed: pip install -e '.[corpus]' (in the repository's folder)" in r.stdout
    assert "LOADED []" in r.stdout


def test_the_cli_names_the_extra_in_one_line(tmp_path):
    page = ROOT / "assets" / "samples" / "courier-short.pdf"
    no_store = run_without(("pyarrow", "duckdb", "ray"), f"""
from mudiff_viz.cli.main import main
sys.exit(main(["corpus", "run", {str(page)!r}, "--out", {str(tmp_path / 's')!r}]))
""")
    assert no_store.returncode == 2 and no_store.stderr.strip().count("\n") == 0, no_store.stderr[-2000:]
    assert "needs pyarrow, which is not installed: pip install -e '.[corpus]' (in the repository's folder)" in no_store.stderr
    no_ray = run_without(("ray",), f"""
from mudiff_viz.cli.main import main
sys.exit(main(["corpus", "run", {str(page)!r}, "--out", {str(tmp_path / 'r')!r}, "--workers", "2", "--ray", "local", "--max-new-tokens", "8"]))
""")
    assert no_ray.returncode == 2 and "needs ray, which is not installed: pip install -e '.[corpus]' (in the repository's folder)" in no_ray.stderr, \
        no_ray.stderr[-2000:]


def test_the_notebook_player_names_its_extra():
    r = run_without(("anywidget",), """
import mudiff_viz as mv
trace = mv.load_trace("assets/traces/courier-short.diffusion.json")  # loading a trace needs no extra
try:
    mv.Player
except Exception as exc:
    print("ERROR", type(exc).__name__, exc)
""")
    assert "ERROR MissingExtra the notebook player needs anywidget, which is not installed: pip install -e '.[notebook]' (in the repository's folder)" \
        in r.stdout, r.stdout + r.stderr[-2000:]


def test_requirements_and_extras_split():
    base = (ROOT / "requirements.txt").read_text()
    dev = (ROOT / "requirements-dev.txt").read_text()
    names = lambda text: {line.split("#")[0].strip().split(">")[0].split("=")[0].split("<")[0]
                          for line in text.splitlines() if line.split("#")[0].strip()}
    assert not names(base) & {"ray", "anywidget", "pandas"}  # what a Space installs: no Ray
    assert {"ray", "anywidget", "pandas", "-r requirements.txt"} <= names(dev)  # the dev install has everything
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert {"corpus", "notebook", "all"} <= set(extras)
    assert any(x.startswith("ray") for x in extras["corpus"]) and any(x.startswith("anywidget") for x in extras["notebook"])


def test_install_hints_work_from_a_clone():
    """The package is on no index: a hint must install from the clone (``pip install -e '.[X]'``, X an
    extra of pyproject.toml), never ``pip install 'mudiff-viz[X]'``, which fails."""
    import re

    extras = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"])
    files = [p for pattern in ("mudiff_viz/**/*.py", "models/**/*.py", "scripts/*.py", "docs/*.md", "*.md", "*.txt",
                               "examples/*.ipynb", "app.py") for p in ROOT.glob(pattern)]
    by_name = [f"{p.relative_to(ROOT)}: {m}" for p in files
               for m in re.findall(r"pip install[^\n`]*mudiff-viz\[", p.read_text(encoding="utf-8"))]
    assert not by_name, by_name
    named = {x for p in files for x in re.findall(r"pip install -e '\.\[(\w+)\]'", p.read_text(encoding="utf-8"))}
    assert named and named <= extras, named - extras


def test_the_notebook_doc_says_how_anywidget_is_installed():
    """docs/notebook.md once said requirements.txt installs anywidget; it does not, so the doc must
    name the extra that does."""
    base = (ROOT / "requirements.txt").read_text()
    doc = (ROOT / "docs" / "notebook.md").read_text()
    if "anywidget" not in base.split("#", 1)[0] and not any(line.startswith("anywidget") for line in base.splitlines()):
        assert "pip install -e '.[notebook]'" in doc
        assert "requirements.txt` installs the API and the widget" not in doc
