"""The Corpus tab's store handling: which folders it may open, and uploaded stores unpacked safely."""

from __future__ import annotations

import os
import zipfile

import pytest

from mudiff_viz.core.errors import UserInputError
from mudiff_viz.ui import corpus_tab


def _store(root):
    (root / "runs").mkdir(parents=True)
    (root / "runs" / "0123456789abcdef.parquet").write_bytes(b"PAR1")
    (root / "pages" / "0123456789abcdef").mkdir(parents=True)
    (root / "pages" / "0123456789abcdef" / "part-00000.parquet").write_bytes(b"PAR1")
    return root


def test_a_store_must_be_under_a_configured_root(tmp_path, monkeypatch):
    monkeypatch.delenv("MUDIFF_CORPUS_ROOTS", raising=False)
    store = _store(tmp_path / "s")
    # the system temporary folder (pytest's tmp_path lies in it) is not a root: on a shared host
    # anyone's files are there
    with pytest.raises(UserInputError, match="outside the folders this app may open stores from"):
        corpus_tab.resolve_store(str(store))
    monkeypatch.setenv("MUDIFF_CORPUS_ROOTS", f"/nonexistent-root{os.pathsep}{tmp_path}")
    assert corpus_tab.resolve_store(str(store)) == store.resolve()
    with pytest.raises(UserInputError, match="outside the folders"):
        corpus_tab.resolve_store("/etc")
    with pytest.raises(UserInputError, match="not a corpus store"):
        corpus_tab.resolve_store(str(tmp_path))
    with pytest.raises(UserInputError, match="type the folder"):
        corpus_tab.resolve_store("  ")


def test_links_and_dot_dots_out_of_a_root_are_refused(tmp_path, monkeypatch):
    root, elsewhere = tmp_path / "root", _store(tmp_path / "elsewhere")
    root.mkdir()
    (root / "link").symlink_to(elsewhere, target_is_directory=True)
    monkeypatch.setenv("MUDIFF_CORPUS_ROOTS", str(root))
    for typed in (root / "link", root / ".." / "elsewhere"):
        with pytest.raises(UserInputError, match="outside the folders"):
            corpus_tab.resolve_store(str(typed))


def test_the_example_store_and_uploaded_stores_open_without_configuration(tmp_path, monkeypatch):
    monkeypatch.delenv("MUDIFF_CORPUS_ROOTS", raising=False)
    if corpus_tab.TraceStore(corpus_tab.EXAMPLE_STORE).exists():
        assert corpus_tab.resolve_store(str(corpus_tab.EXAMPLE_STORE)) == corpus_tab.EXAMPLE_STORE.resolve()
    upload = tmp_path / "store.zip"
    with zipfile.ZipFile(upload, "w") as z:
        z.writestr("runs/0123456789abcdef.parquet", b"PAR1")
    out = corpus_tab.unpack_store(str(upload))
    assert corpus_tab.UPLOADED_STORES.resolve() in out.resolve().parents
    assert corpus_tab.resolve_store(str(out)) == out.resolve()
    assert corpus_tab.own_private_folder(corpus_tab.UPLOADED_STORES)


def test_an_uploads_folder_others_can_write_is_not_a_root(tmp_path, monkeypatch):
    monkeypatch.delenv("MUDIFF_CORPUS_ROOTS", raising=False)
    shared = tmp_path / "shared-stores"
    shared.mkdir()
    shared.chmod(0o777)
    store = _store(shared / "planted")
    monkeypatch.setattr(corpus_tab, "UPLOADED_STORES", shared)
    with pytest.raises(UserInputError, match="outside the folders"):
        corpus_tab.resolve_store(str(store))


def test_uploaded_zip_is_unpacked_with_checks(tmp_path):
    good = tmp_path / "good.zip"
    with zipfile.ZipFile(good, "w") as z:
        z.writestr("mystore/runs/0123456789abcdef.parquet", b"PAR1")
        z.writestr("mystore/pages/0123456789abcdef/part-00000.parquet", b"PAR1")
        z.writestr("mystore/notes.sh", b"rm -rf /")  # not a Parquet file: left out
    out = corpus_tab.unpack_store(str(good))
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()) == [
        "pages/0123456789abcdef/part-00000.parquet", "runs/0123456789abcdef.parquet"]
    evil = tmp_path / "evil.zip"
    with zipfile.ZipFile(evil, "w") as z:
        z.writestr("runs/0123456789abcdef.parquet", b"PAR1")
        z.writestr("../../escape.parquet", b"PAR1")
    with pytest.raises(UserInputError, match="outside its own folder"):
        corpus_tab.unpack_store(str(evil))
    empty = tmp_path / "empty.zip"
    with zipfile.ZipFile(empty, "w") as z:
        z.writestr("readme.txt", b"hi")
    with pytest.raises(UserInputError, match="no corpus store"):
        corpus_tab.unpack_store(str(empty))
    notzip = tmp_path / "x.zip"
    notzip.write_bytes(b"not a zip")
    with pytest.raises(UserInputError, match="not a .zip"):
        corpus_tab.unpack_store(str(notzip))


def test_cer_is_a_percentage_in_every_corpus_view():
    """The overview showed mean_cer 0.02545 where every other view says 2.55%: the table, the report
    and the page points' hover text now all show percentages (tables.json keeps the fractions)."""
    import re

    from mudiff_viz.corpus.report import tables_markdown
    from mudiff_viz.corpus.stats import corpus_figures, corpus_tables

    store = corpus_tab.EXAMPLE_STORE
    tabs = corpus_tables(store)
    shown = corpus_tab.open_store(store, None)
    table = shown["overview"]
    headers = table["headers"]
    col = headers.index("mean_cer")
    cells = [row[col] for row in table["value"]]
    means = [r["mean_cer"] for r in tabs["overview"]]
    assert cells == [f"{100 * m:.2f}%" for m in means] and any(m > 0 for m in means)
    report = tables_markdown(tabs)
    section = report.split("## CER by probe condition")[1].split("##")[0]
    rows = [line for line in section.splitlines() if line.startswith("| diffusion") or line.startswith("| ar")]
    assert rows and all(len(re.findall(r"\d+\.\d\d%", line)) == 5 for line in rows), rows[:2]
    hovers = [h for trace in corpus_figures(store, tables=tabs)["cer_by_level"].data for h in (trace.hovertext or ())]
    assert hovers and all(re.search(r"CER \d+\.\d\d%$", h) for h in hovers), hovers[:2]
