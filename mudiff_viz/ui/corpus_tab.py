"""The Corpus tab: open a Parquet trace store (``python -m mudiff_viz corpus run``), see decoding order,
calibration and CER in aggregate, and click any page's point to play that page's trace.

A store is opened from a folder on the server (only under the configured roots: the shipped example
store, the app's own output folder and MUDIFF_CORPUS_ROOTS; never the system temporary folder, where
on a shared host anyone's files lie) or uploaded as a small .zip of the store folder, unpacked into
the app's output folder with size and name checks. Nothing in a store is executed: Parquet files are read by DuckDB and
pyarrow, traces are validated like any uploaded trace.
"""

from __future__ import annotations

import os
import re
import zipfile
import zlib
from pathlib import Path

import gradio as gr

from mudiff_viz.core.errors import UserInputError
from mudiff_viz.core.extras import MissingExtra
from mudiff_viz.ui.clickplot import PLOTLY_JS, ClickPlot
from mudiff_viz.ui import disk
from mudiff_viz.ui.common import ROOT, file_path, user_errors
from mudiff_viz.ui.corpus_pages import corpus_page_image
from mudiff_viz.ui.player import Player
from mudiff_viz.ui.slot import trims_after
from mudiff_viz.views import tables
from mudiff_viz.views.labels import counted
from mudiff_viz.views.page_image import image_data_url
from mudiff_viz.views.player import player_payload

try:  # the corpus extra (pyarrow, duckdb): without it the tab says which extra to install
    from mudiff_viz.corpus.report import shown_rows, tables_markdown
    from mudiff_viz.corpus.stats import corpus_figures, corpus_tables
    from mudiff_viz.corpus.store import TraceStore, check_run_id, load_page_trace, unreadable_file

    CORPUS_MISSING: str | None = None
except MissingExtra as exc:
    CORPUS_MISSING = f"The Corpus tab: {exc}"


def need_corpus() -> None:
    if CORPUS_MISSING:
        raise MissingExtra(CORPUS_MISSING)


EXAMPLE_STORE = ROOT / "assets" / "corpus"  # a small store made by scripts (see docs/corpus.md), when present
UPLOADED_STORES = disk.STORES  # in the app's budgeted folder: uploaded .zip stores unpack here
MAX_ZIP_BYTES = 200_000_000  # unpacked size of an uploaded store
MAX_ZIP_FILES = 5_000
FIGURES = ("cer_by_level", "tokens_per_forward", "calibration", "step_by_position", "lateness_by_class",
           "lateness_by_distance")
ALL_RUNS = "all runs (pooled)"


def allowed_paths() -> list[str]:
    """What the server may hand the browser besides Gradio's own files: plotly.js for the clickable figures."""
    return [str(PLOTLY_JS)]


def store_roots() -> list[Path]:
    """Folders the tab may open stores from: the shipped example, the app's output folder (uploaded
    stores are unpacked there) and the ``MUDIFF_CORPUS_ROOTS`` folders (``os.pathsep``-separated)."""
    roots = [EXAMPLE_STORE, UPLOADED_STORES]
    roots += [Path(p).expanduser() for p in os.environ.get("MUDIFF_CORPUS_ROOTS", "").split(os.pathsep) if p.strip()]
    return [r.resolve() for r in roots]


def source_roots() -> list[Path]:
    """Where a store's pages may be re-rendered from: the store roots and the repository's own files."""
    return store_roots() + [ROOT.resolve()]


def own_private_folder(path: Path) -> bool:
    """The uploads folder counts only when this process made it: owned by us, writable by nobody else
    (it lies in the temporary folder, where another user could have made it first)."""
    try:
        st = path.stat()
    except OSError:
        return False
    return st.st_uid == os.getuid() and not st.st_mode & 0o022


def under_roots(path: Path) -> bool:
    """Whether the resolved ``path`` lies in a store root (links already followed by resolve())."""
    uploads = UPLOADED_STORES.resolve()
    return any((path == r or r in path.parents) and (r != uploads or own_private_folder(r)) for r in store_roots())


def resolve_store(path_text: str | None) -> Path:
    """A store folder typed by the user: it must exist, lie under an allowed root, and be a store."""
    need_corpus()
    text = (path_text or "").strip()
    if not text:
        raise UserInputError("type the folder of a corpus store (python -m mudiff_viz corpus run ... --out DIR), "
                             "or upload one as a .zip")
    if "\0" in text:
        raise UserInputError("the store folder's name holds a NUL byte")
    shown = text if len(text) <= 80 else text[:79] + "…"  # a visitor's text is echoed at most 80 characters long
    path = Path(text).expanduser()
    path = (path if path.is_absolute() else Path.cwd() / path).resolve()
    if not under_roots(path):
        raise UserInputError(f"{shown} is outside the folders this app may open stores from "
                             "(set MUDIFF_CORPUS_ROOTS to allow more)")
    if not TraceStore(path).exists():
        raise UserInputError(f"{shown} is not a corpus store (no runs/ folder in it)")
    return path


def unpack_store(zip_path: str) -> Path:
    """An uploaded .zip of a store, unpacked into a fresh folder of the app's budgeted folder
    (``ui/disk.py``). Count and names are checked before anything is written; the unpacked size is
    counted while unpacking (a zip's header can lie) against what the folder has room for; only
    .parquet files are kept, and each must open. A refused upload is deleted at once."""
    try:
        archive = zipfile.ZipFile(zip_path)
    except (zipfile.BadZipFile, OSError):
        raise UserInputError("the upload is not a .zip file: zip the store folder (runs/, pages/, ...) and upload that")
    with archive:
        members = [m for m in archive.infolist() if not m.is_dir()]
        if len(members) > MAX_ZIP_FILES:
            raise UserInputError(f"the .zip holds {len(members)} files (limit {MAX_ZIP_FILES})")
        declared = sum(m.file_size for m in members)
        if declared > MAX_ZIP_BYTES:
            raise too_big(MAX_ZIP_BYTES)
        names = [Path(m.filename) for m in members]
        if any(n.is_absolute() or ".." in n.parts for n in names):
            raise UserInputError("the .zip has file names outside its own folder")
        parquet = [(m, n) for m, n in zip(members, names) if n.suffix == ".parquet"]
        runs = [n for _, n in parquet if n.parent.name == "runs"]
        if not runs:
            raise UserInputError("the .zip holds no corpus store (no runs/*.parquet)")
        prefix = runs[0].parent.parent  # the store may sit in a folder inside the zip
        UPLOADED_STORES.mkdir(mode=0o700, parents=True, exist_ok=True)
        if not own_private_folder(UPLOADED_STORES):
            raise UserInputError(f"{UPLOADED_STORES} belongs to another user or is writable by others: "
                                 "the app will not unpack stores there")
        out = disk.new_folder("store-", UPLOADED_STORES)
        try:
            budget = min(MAX_ZIP_BYTES, disk.room(declared, keep=out))
            written = 0
            for member, name in parquet:
                if prefix != Path(".") and prefix not in name.parents:
                    continue
                target = out / name.relative_to(prefix)
                target.parent.mkdir(parents=True, exist_ok=True)
                try:
                    with archive.open(member) as src:
                        n = disk.copy_capped(src, target, budget - written)
                except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError) as exc:
                    raise UserInputError(f"the .zip is damaged or uses an unsupported format ({type(exc).__name__})") from None
                if n < 0:
                    raise too_big(budget)
                written += n
            bad = unreadable_file(out)
            if bad:
                raise UserInputError(f"the store's file {bad} is not a Parquet file that can be read")
        except BaseException:
            disk.remove(out)
            raise
    return out


def too_big(limit: int) -> UserInputError:
    return UserInputError(f"the .zip unpacks to more than {limit / 1e6:.0f} MB (the most this app keeps for an upload "
                          "now): open a store that big by its folder on the server")


def store_error(exc: Exception, store: Path) -> UserInputError:
    """A store DuckDB or pyarrow cannot read, in one line with no server path in it."""
    text = (str(exc).splitlines() or [""])[0]
    for path in (str(store.resolve()), str(store)):
        text = text.replace(path + "/", "").replace(path, store.name)
    text = re.sub(r"(?<![\w.])/(?:[^\s'\"/]+/)+", "", text)  # any other absolute folder on the server
    return UserInputError(f"the store cannot be read: {type(exc).__name__}: {text[:200]}")


def run_choices(store: Path) -> list[str]:
    return [ALL_RUNS] + TraceStore(store).run_ids()


def _run(run: str | None) -> str | None:
    return None if not run or run == ALL_RUNS else check_run_id(run)


def open_store(store: Path, run: str | None) -> dict:
    """Everything the tab shows for a store: the summary, the overview table, the figures, the tables."""
    run_id = _run(run)
    tabs = corpus_tables(store, run_id)
    figs = corpus_figures(store, run_id, tables=tabs)
    over = tabs["overview"]
    ok = sum(r.get("pages_ok", 0) or 0 for r in over)
    failed = sum(r.get("failed", 0) or 0 for r in over)
    status = (f"**{store.name}** · {counted(len(tabs['runs']), 'run')} · {counted(ok, 'decoded page')}, {failed} failed. "
              "Click a page's point in a figure to play its trace below.")
    headers = list(over[0].keys()) if over else ["decoder"]
    over = shown_rows("overview", over)  # mean_cer as a percentage, as every other view shows CER
    return {
        "status": status,
        "overview": gr.update(value=[[_cell(r[h]) for h in headers] for r in over], headers=headers),
        **{name: figs[name].to_json() for name in FIGURES},
        "tables": tables_markdown(tabs),
    }


def _cell(value):
    return float(f"{value:.4g}") if isinstance(value, float) else value


@user_errors
@trims_after
def open_corpus(path_text, upload, run):
    """Open a store (the uploaded .zip when there is one, else the typed folder)."""
    need_corpus()
    zip_path = file_path(upload)
    store = resolve_store(str(unpack_store(zip_path))) if zip_path else resolve_store(path_text)
    try:
        choices = run_choices(store)
        run = run if run in choices else ALL_RUNS
        shown = open_store(store, run)
    except Exception as exc:
        if zip_path:  # a refused upload leaves nothing behind
            disk.remove(store)
        if type(exc).__module__.split(".")[0] in ("duckdb", "pyarrow", "_duckdb"):
            raise store_error(exc, store) from None
        raise
    return (str(store), gr.update(choices=choices, value=run), shown["status"], shown["overview"],
            *(shown[n] for n in FIGURES), shown["tables"])


@user_errors
def open_point(store_dir, evt: gr.EventData):
    """The trace of the page whose point was clicked, in the player."""
    need_corpus()
    key = (getattr(evt, "_data", None) or {}).get("key")
    if not store_dir:
        raise UserInputError("open a corpus store first")
    if not isinstance(key, (list, tuple)) or len(key) != 3:
        raise UserInputError("that point is not a page (click a page's point: the faint dots)")
    run_id, page_id, decoder = (str(k) for k in key)
    if not under_roots(Path(store_dir).resolve()):
        raise UserInputError("that store is outside the folders this app may open stores from: open it again")
    trace = load_page_trace(store_dir, check_run_id(run_id), page_id, decoder)
    img = corpus_page_image(trace, page_id, source_roots(), ROOT)
    payload = player_payload(trace, image_url=image_data_url(img) if img is not None else None)
    return tables.summary_markdown(trace) + f"  \npage `{page_id}` of run `{run_id}`", payload


def open_on_first_view(store_dir, path_text, upload, run):
    """The tab's first view opens the prefilled store (nothing to press); later views keep what is open."""
    if store_dir or not (path_text or "").strip() or CORPUS_MISSING:
        return tuple(gr.skip() for _ in range(4 + len(FIGURES)))
    return open_corpus(path_text, upload, run)


def build(tab: gr.Tab | None = None) -> None:
    """The tab's contents; with ``tab``, its first selection opens the prefilled store."""
    gr.Markdown("### A corpus of decodes, in aggregate\nDecode many pages with `python -m mudiff_viz corpus run "
                "INPUTS --out DIR` (on a Ray cluster with `--ray auto`), then open the store here: decoding order, "
                "lateness, calibration and CER over all pages. **Click a page's point** to play that page. "
                "See `docs/corpus.md`.", elem_classes="mudiff-note")
    if CORPUS_MISSING:
        gr.Markdown(f"⚠ {CORPUS_MISSING}", elem_classes="mudiff-warning", elem_id="corpus-missing")
    default = str(EXAMPLE_STORE) if not CORPUS_MISSING and TraceStore(EXAMPLE_STORE).exists() else ""
    with gr.Row(equal_height=False):
        path = gr.Textbox(value=default, label="Store folder on the server", elem_id="corpus-path", scale=4,
                          placeholder="runs/corpus")
        upload = gr.File(label="…or upload a store (.zip)", file_types=[".zip"], height=90, scale=2, elem_id="corpus-upload")
        with gr.Column(scale=2, min_width=200):
            run = gr.Dropdown([ALL_RUNS], value=ALL_RUNS, label="Run", elem_id="corpus-run")
            open_btn = gr.Button("Open", variant="primary", elem_id="corpus-open")
    store_state = gr.State("")
    status = gr.Markdown(elem_id="corpus-status")
    overview = gr.Dataframe(label="Overview", interactive=False, wrap=True, elem_id="corpus-overview")
    plots = {}
    for i in range(0, len(FIGURES), 2):
        with gr.Row(equal_height=False):
            for name in FIGURES[i : i + 2]:
                with gr.Column(min_width=300):
                    plots[name] = ClickPlot(elem_id=f"corpus-fig-{name.replace('_', '-')}")
    page_status = gr.Markdown(elem_id="corpus-page-status")
    player = Player(elem_id="corpus-player")
    with gr.Accordion("All tables", open=False):
        tables_md = gr.Markdown(elem_id="corpus-tables")
    outputs = [store_state, run, status, overview, *(plots[n] for n in FIGURES), tables_md]
    # one at a time, in order: the first view's open never lands on top of a store opened after it
    once = {"concurrency_id": f"corpus-open-{id(outputs)}", "concurrency_limit": 1}
    open_btn.click(open_corpus, [path, upload, run], outputs, api_name="open_corpus", **once)
    upload.upload(open_corpus, [path, upload, run], outputs, api_visibility="private", **once)
    run.input(open_corpus, [path, upload, run], outputs, api_visibility="private", **once)
    if tab is not None:
        tab.select(open_on_first_view, [store_state, path, upload, run], outputs, api_visibility="private", **once)
    for plot in plots.values():
        plot.click(open_point, [store_state], [page_status, player], api_visibility="private", scroll_to_output=True)
