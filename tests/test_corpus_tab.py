"""The Corpus tab's store handling: which folders it may open, and uploaded stores unpacked safely."""

from __future__ import annotations

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


def test_a_store_must_be_under_an_allowed_root(tmp_path, monkeypatch):
    store = _store(tmp_path / "s")
    assert corpus_tab.resolve_store(str(store)) == store.resolve()  # the temporary folder is allowed
    with pytest.raises(UserInputError, match="outside the folders"):
        corpus_tab.resolve_store("/etc")
    with pytest.raises(UserInputError, match="not a corpus store"):
        corpus_tab.resolve_store(str(tmp_path))
    with pytest.raises(UserInputError, match="type the folder"):
        corpus_tab.resolve_store("  ")


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
