"""The Corpus tab's store handling: which folders it may open, and uploaded stores unpacked safely."""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

import pytest

from mudiff_viz.core.errors import UserInputError
from mudiff_viz.ui import corpus_tab, disk


def parquet_bytes(text: str = "x") -> bytes:
    """A real (if tiny) Parquet file: uploaded stores must open."""
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    buf = io.BytesIO()
    pq.write_table(pa.table({"a": [text]}), buf, compression="none")
    return buf.getvalue()


PAR = parquet_bytes()


def _store(root):
    (root / "runs").mkdir(parents=True)
    (root / "runs" / "0123456789abcdef.parquet").write_bytes(PAR)
    (root / "pages" / "0123456789abcdef").mkdir(parents=True)
    (root / "pages" / "0123456789abcdef" / "part-00000.parquet").write_bytes(PAR)
    return root


@pytest.fixture(autouse=True)
def own_app_folder(tmp_path, monkeypatch):
    """The app's budgeted folder in this test's own folder (pruning never touches anyone else's)."""
    root = tmp_path / "mudiff-app"
    monkeypatch.setattr(disk, "OUT_ROOT", root)
    monkeypatch.setattr(corpus_tab, "UPLOADED_STORES", root / "stores")
    monkeypatch.delenv("MUDIFF_MAX_APP_DISK_BYTES", raising=False)
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
        z.writestr("runs/0123456789abcdef.parquet", PAR)
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
        z.writestr("mystore/runs/0123456789abcdef.parquet", PAR)
        z.writestr("mystore/pages/0123456789abcdef/part-00000.parquet", PAR)
        z.writestr("mystore/notes.sh", b"rm -rf /")  # not a Parquet file: left out
    out = corpus_tab.unpack_store(str(good))
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()) == [
        "pages/0123456789abcdef/part-00000.parquet", "runs/0123456789abcdef.parquet"]
    evil = tmp_path / "evil.zip"
    with zipfile.ZipFile(evil, "w") as z:
        z.writestr("runs/0123456789abcdef.parquet", PAR)
        z.writestr("../../escape.parquet", PAR)
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


def padded_store_zip(path, pad_bytes: int, pad: str = "extra/pad.parquet", junk: bool = False):
    """The shipped example store zipped with a highly compressible extra file (kilobytes in the zip,
    ``pad_bytes`` unpacked): a valid Parquet file, or junk named .parquet with ``junk``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for f in corpus_tab.EXAMPLE_STORE.rglob("*.parquet"):
            z.write(f, f.relative_to(corpus_tab.EXAMPLE_STORE).as_posix())
        if junk:
            z.writestr(pad, b"\0" * pad_bytes)
        else:
            import io

            buf = io.BytesIO()
            pq.write_table(pa.table({"a": ["0" * pad_bytes]}), buf, compression="none")
            z.writestr(pad, buf.getvalue())
    return path


def test_repeated_compressible_zips_keep_the_folder_under_its_cap(tmp_path, own_app_folder, monkeypatch):
    """The Corpus tab's handler, as a visitor uploading in a loop: each zip (the example store and
    8 MB of zeros) unpacks to ~13 MB; with a 40 MB cap the oldest stores go and the folder never
    grows past the cap."""
    if corpus_tab.CORPUS_MISSING or not corpus_tab.TraceStore(corpus_tab.EXAMPLE_STORE).exists():
        pytest.skip("needs the corpus extra and the example store")
    cap = 40_000_000
    monkeypatch.setenv("MUDIFF_MAX_APP_DISK_BYTES", str(cap))
    upload = padded_store_zip(tmp_path / "store.zip", 8_000_000)
    opened = []
    for _ in range(8):
        out = corpus_tab.open_corpus("", str(upload), None)
        opened.append(out[0])
        assert "decoded page" in out[2]
        assert disk.tree_bytes(Path(out[0])) > upload.stat().st_size + 7_000_000  # the zeros compress
        assert disk.tree_bytes(own_app_folder) <= cap
    assert len(list((own_app_folder / "stores").iterdir())) < 8  # the oldest went
    assert Path(opened[-1]).is_dir()  # the newest is there to click into


def test_an_upload_past_the_room_left_is_refused_while_unpacking_and_deleted(tmp_path, own_app_folder, monkeypatch):
    monkeypatch.setenv("MUDIFF_MAX_APP_DISK_BYTES", "3000000")
    upload = padded_store_zip(tmp_path / "big.zip", 8_000_000)
    with pytest.raises(UserInputError, match=r"^the .zip unpacks to more than 3 MB"):
        corpus_tab.unpack_store(str(upload))
    assert not list((own_app_folder / "stores").iterdir())


def test_a_zip_whose_header_understates_its_size_is_refused(tmp_path, own_app_folder):
    """The central directory claims 100 bytes for an 8 MB member: unpacking counts what comes out."""
    upload = padded_store_zip(tmp_path / "liar.zip", 8_000_000)
    with zipfile.ZipFile(upload) as z:
        info = z.getinfo("extra/pad.parquet")
        real = info.file_size
    data = bytearray(upload.read_bytes())
    cd = data.rfind(b"PK\x01\x02")  # the last entry of the central directory is the pad
    assert int.from_bytes(data[cd + 24 : cd + 28], "little") == real
    data[cd + 24 : cd + 28] = (100).to_bytes(4, "little")
    upload.write_bytes(bytes(data))
    with zipfile.ZipFile(upload) as z:
        assert z.getinfo("extra/pad.parquet").file_size == 100
    with pytest.raises(UserInputError) as exc:
        corpus_tab.unpack_store(str(upload))
    assert "\n" not in str(exc.value)
    assert not list((own_app_folder / "stores").iterdir())


def test_an_unreadable_store_is_one_line_without_a_server_path(tmp_path, own_app_folder):
    if corpus_tab.CORPUS_MISSING:
        pytest.skip("needs the corpus extra")
    upload = padded_store_zip(tmp_path / "junk.zip", 1_000_000, pad="pages/97fdedbec4c2f996/part-00009.parquet", junk=True)
    import gradio as gr

    with pytest.raises(gr.Error) as exc:
        corpus_tab.open_corpus("", str(upload), None)
    message = exc.value.message
    assert message == "the store's file pages/97fdedbec4c2f996/part-00009.parquet is not a Parquet file that can be read"
    assert str(tmp_path) not in message and "/tmp" not in message
    assert not list((own_app_folder / "stores").iterdir())


def test_a_typed_store_duckdb_cannot_read_names_no_server_path(tmp_path, own_app_folder, monkeypatch):
    if corpus_tab.CORPUS_MISSING:
        pytest.skip("needs the corpus extra")
    import shutil

    import gradio as gr

    store = tmp_path / "roots" / "mystore"
    shutil.copytree(corpus_tab.EXAMPLE_STORE, store)
    (store / "pages" / "97fdedbec4c2f996" / "part-00000.parquet").write_bytes(b"\0" * 1000)
    monkeypatch.setenv("MUDIFF_CORPUS_ROOTS", str(tmp_path / "roots"))
    with pytest.raises(gr.Error) as exc:
        corpus_tab.open_corpus(str(store), None, None)
    message = exc.value.message
    assert message.startswith("the store cannot be read: ") and "\n" not in message
    assert str(tmp_path) not in message and "'pages/97fdedbec4c2f996/part-00000.parquet'" in message, message


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
