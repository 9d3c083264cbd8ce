"""Hostile files, generated here, through the CLI as a user runs it: each gets a clear one-line
message and the bad-input exit code, never a traceback or a hang."""

from __future__ import annotations

import io
import json
import struct
import zlib
from pathlib import Path

import pymupdf
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from PIL import Image

from mudiff_viz.core.errors import UserInputError
from mudiff_viz.core.trace import Trace
from tests.test_cli import run_cli


def png_bytes(w: int = 40, h: int = 20) -> bytes:
    buf = io.BytesIO()
    Image.new("L", (w, h), 255).save(buf, format="PNG")
    return buf.getvalue()


def bomb_png(width: int = 100_000, height: int = 100_000) -> bytes:
    """A valid PNG header claiming ``width`` x ``height`` pixels (a decompression bomb)."""
    data = bytearray(png_bytes())
    ihdr = struct.pack(">II", width, height) + bytes(data[24:29])
    data[16:29] = ihdr
    data[29:33] = struct.pack(">I", zlib.crc32(b"IHDR" + ihdr) & 0xFFFFFFFF)
    return bytes(data)


def pdf_with(pages: int = 1, width: float = 612, height: float = 792, text: str = "Hello") -> bytes:
    doc = pymupdf.open()
    for _ in range(pages):
        page = doc.new_page(width=width, height=height)
        page.insert_text((72, 72), text, fontname="helv", fontsize=12)
    data = doc.tobytes()
    doc.close()
    return data


def encrypted_pdf() -> bytes:
    doc = pymupdf.open(stream=pdf_with(), filetype="pdf")
    data = doc.tobytes(encryption=pymupdf.PDF_ENCRYPT_AES_256, owner_pw="owner", user_pw="secret")
    doc.close()
    return data


ZERO_PAGE_PDF = (
    b"%PDF-1.4\n1 0 obj<</Type/Catalog/Pages 2 0 R>>endobj\n2 0 obj<</Type/Pages/Kids[]/Count 0>>endobj\n"
    b"trailer<</Root 1 0 R>>\n%%EOF\n"
)


def js_pdf() -> bytes:
    """A PDF with a JavaScript open action and HTML in its text layer."""
    doc = pymupdf.open()
    page = doc.new_page()
    page.insert_text((72, 72), "<script>alert(1)</script> <b>bold</b>", fontname="helv", fontsize=12)
    data = doc.tobytes()
    doc.close()
    doc = pymupdf.open(stream=data, filetype="pdf")
    xref = doc.get_new_xref()
    doc.update_object(xref, "<</S/JavaScript/JS(app.alert('pwned'))>>")
    doc.xref_set_key(doc.pdf_catalog(), "OpenAction", f"{xref} 0 R")
    data = doc.tobytes()
    doc.close()
    return data


def truncated_pdf() -> bytes:
    """The first third of a multi-page PDF with object streams (as most PDFs are written today): a
    download cut off before its cross-reference table, so MuPDF finds no page in what is left."""
    doc = pymupdf.open()
    for _ in range(40):
        doc.new_page().insert_text((72, 72), "Hello " * 40, fontname="helv", fontsize=12)
    data = doc.tobytes(garbage=3, deflate=True, use_objstms=1)
    doc.close()
    return data[: len(data) // 3]


CORPUS = {
    "bomb.png": (bomb_png, "image too large"),
    # the megapixels a person counts in, not Pillow's "could be decompression bomb DOS attack"
    "12000x12000.png": (lambda: bomb_png(12_000, 12_000), "image is 144 MP; the limit is 40 MP"),
    "truncated.pdf": (truncated_pdf, "PDF is damaged or truncated"),
    "truncated.png": (lambda: png_bytes(400, 300)[:60], "cannot read PNG image"),
    "random.jpg": (lambda: bytes(range(256)) * 40, "not a PNG, JPEG or PDF"),
    "empty.png": (lambda: b"", "empty file"),
    "text.pdf": (lambda: b"just some text, not a PDF at all\n" * 20, "not a PNG, JPEG or PDF"),
    "zero-pages.pdf": (lambda: ZERO_PAGE_PDF, "no pages"),
    "encrypted.pdf": (encrypted_pdf, "password-protected"),
    "corrupt.pdf": (lambda: b"%PDF-1.7\n" + bytes(range(256)) * 8, "PDF"),
    "huge-page.pdf": (lambda: pdf_with(width=14400, height=14400), "larger than the limit"),
    "many-pages.pdf": (lambda: pdf_with(pages=3000), "3000 pages"),
}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("hostile")
    for name, (make, _) in CORPUS.items():
        (d / name).write_bytes(make())
    return d


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_hostile_file_gets_one_line_and_exit_2(corpus, name, tmp_path):
    r = run_cli("decode", str(corpus / name), "--out", str(tmp_path / "t.json"), timeout=120)
    assert r.returncode == 2, (name, r.returncode, r.stderr)
    assert CORPUS[name][1] in r.stderr, (name, r.stderr)
    assert r.stderr.startswith("error: ") and len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "t.json").exists()


def test_javascript_pdf_is_decoded_as_text_and_never_run(tiny_models, tmp_path):
    (tmp_path / "js.pdf").write_bytes(js_pdf())
    out = tmp_path / "t.json"
    r = run_cli("decode", str(tmp_path / "js.pdf"), "--model", str(tiny_models["ar"]), "--decoder", "ar", "--out", str(out))
    assert r.returncode == 0, r.stderr
    trace = Trace.load(out)
    assert trace.gt_text == "<script>alert(1)</script> <b>bold</b>"  # kept as plain text


def test_pdf_subprocess_limits(corpus, tmp_path, monkeypatch):
    """The renderer's time and memory limits are real: tiny limits fail with the right message."""
    good = tmp_path / "good.pdf"
    good.write_bytes(pdf_with())
    monkeypatch.setenv("MUDIFF_PDF_TIMEOUT_S", "0.01")
    r = run_cli("decode", str(good), "--out", str(tmp_path / "t.json"))
    assert r.returncode == 2 and "longer than" in r.stderr
    monkeypatch.setenv("MUDIFF_PDF_TIMEOUT_S", "30")
    monkeypatch.setenv("MUDIFF_PDF_MEMORY_MB", "40")
    r = run_cli("decode", str(good), "--out", str(tmp_path / "t.json"))
    assert r.returncode == 2 and "memory" in r.stderr, r.stderr


def test_upload_size_limit_flag(tmp_path):
    big = tmp_path / "big.png"
    big.write_bytes(png_bytes(2000, 2000) + b"\0" * 3_000_000)
    r = run_cli("decode", str(big), "--max-upload-mb", "1", "--out", str(tmp_path / "t.json"))
    assert r.returncode == 2 and "file too large" in r.stderr


HOSTILE_TRACES = {
    "not-json.json": (b"\x00\x01garbage", "not valid JSON"),
    "deep.json": (b"[" * 5000 + b"]" * 5000, "nested deeper"),
    "nan.json": (b'{"schema_version": 1, "x": NaN}', "non-finite"),
    "wrong-version.json": (b'{"schema_version": 99}', "schema_version"),
    "list.json": (b"[]", "must be an object"),
}


@pytest.mark.parametrize("name", sorted(HOSTILE_TRACES))
def test_hostile_trace_via_cli(name, tmp_path):
    data, message = HOSTILE_TRACES[name]
    (tmp_path / name).write_bytes(data)
    r = run_cli("view", str(tmp_path / name), timeout=60)
    assert r.returncode == 2 and message in r.stderr and len(r.stderr.strip().splitlines()) == 1


# ---- property-based: the trace loader never fails any other way ----------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(json_values)
@example({"\n": float("inf")})  # an upload's key with a line break in the error's field path (found by this test)
def test_trace_loader_accepts_or_refuses_cleanly(value):
    try:
        Trace.loads(json.dumps(value))
    except UserInputError as exc:
        assert "\n" not in str(exc)


@pytest.fixture(scope="module")
def valid_trace_dict():
    from mudiff_viz.decoding.diffusion import decode_diffusion
    from mudiff_viz.decoding.settings import DecodeParams
    from tests.fixed_backend import FixedBackend, FixedPage

    b = FixedBackend(seed=2, n_rows=2)
    return decode_diffusion(b, FixedPage(), b.regions(None), DecodeParams(block_length=8, steps=4, max_new_tokens=16)).to_dict()


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(path_seed=st.integers(0, 10**6), replacement=json_values)
def test_mutated_valid_traces_load_or_name_a_field(valid_trace_dict, path_seed, replacement):
    """Replace one random node of a valid trace: the loader either accepts it or names a field."""
    import copy
    import random

    d = copy.deepcopy(valid_trace_dict)
    rng = random.Random(path_seed)
    node = d
    while True:
        keys = sorted(node) if isinstance(node, dict) else list(range(len(node)))
        if not keys:
            return
        key = rng.choice(keys)
        child = node[key]
        if isinstance(child, (dict, list)) and child and rng.random() < 0.7:
            node = child
            continue
        break
    node[key] = replacement
    try:
        Trace.loads(json.dumps(d))
    except UserInputError as exc:
        assert "field '" in str(exc) or "schema_version" in str(exc) or "its counts disagree: " in str(exc)
        assert "\n" not in str(exc)


@pytest.mark.parametrize("damage", ["truncated", "wrong-shape"])
def test_a_damaged_nano_checkpoint_exits_3_with_one_line(damage, tmp_path):
    """A truncated model.safetensors (a download cut short), or weights another config.json made:
    ModelLoadError naming the file and what disagrees, exit 3, never SafetensorError's exit 1."""
    from tests.ui_support import tiny_twin

    model = tiny_twin("diffusion", tmp_path / "nano")
    weights = model / "model.safetensors"
    if damage == "truncated":
        weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    else:
        cfg = json.loads((model / "config.json").read_text())
        cfg["mlp_hidden"] *= 2
        (model / "config.json").write_text(json.dumps(cfg))
    r = run_cli("decode", "assets/samples/courier-short.pdf", "--model", str(model), "--max-new-tokens", "8",
                "--out", str(tmp_path / "t.json"), timeout=120)
    assert r.returncode == 3 and r.stderr.count("\n") == 1, r.stderr
    assert r.stderr.startswith(f"error: {weights} ")
    if damage == "truncated":
        assert "cannot be read as safetensors" in r.stderr and "truncated or corrupt" in r.stderr
    else:
        assert "does not match config.json" in r.stderr and "(config.json wants (" in r.stderr


def owner_password_pdf() -> bytes:
    """Encrypted with an owner password only: anyone may open it, and its permissions forbid copying."""
    doc = pymupdf.open(stream=pdf_with(text="Owner locked"), filetype="pdf")
    data = doc.tobytes(encryption=pymupdf.PDF_ENCRYPT_AES_256, owner_pw="owner", permissions=pymupdf.PDF_PERM_ACCESSIBILITY)
    doc.close()
    return data


def test_a_pdf_with_only_an_owner_password_is_decoded(tiny_models, tmp_path):
    """docs/hardening.md: every PDF reader opens such a file without asking; its permission flags ask
    readers not to copy or print, and the app only shows the page and its text to the visitor who
    sent it. A user password (needed to open the file) is refused."""
    (tmp_path / "owner.pdf").write_bytes(owner_password_pdf())
    out = tmp_path / "t.json"
    r = run_cli("decode", str(tmp_path / "owner.pdf"), "--model", str(tiny_models["ar"]), "--decoder", "ar", "--out", str(out))
    assert r.returncode == 0, r.stderr
    assert Trace.load(out).gt_text == "Owner locked"
    (tmp_path / "user.pdf").write_bytes(encrypted_pdf())
    r = run_cli("decode", str(tmp_path / "user.pdf"), "--out", str(tmp_path / "u.json"))
    assert r.returncode == 2 and r.stderr == "error: PDF is password-protected\n"


@pytest.mark.parametrize("knob", ["dpi", "blur", "noise", "rotate", "seed"])
def test_probe_values_that_are_not_finite_are_refused(knob):
    """The app's probe controls: NaN compares False with every bound, so it was silently dropped."""
    from mudiff_viz.probes.apply import probe_spec

    with pytest.raises(UserInputError, match=r"must be a finite number, got nan$"):
        probe_spec(**{knob: float("nan")})
