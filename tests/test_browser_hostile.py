"""Hostile input typed or uploaded in Chromium: the Corpus tab answers a 5,000-character folder and a
store DuckDB cannot read with one short toast, never the server's path.

Skipped with a reason when /usr/bin/chromium or the playwright package is missing. The app runs on
random-weight nano twins (tests/ui_support.py).
"""

from __future__ import annotations

import pytest

from tests.ui_support import require_chromium

require_chromium()


def toast_text(page) -> str:
    toast = page.locator("[data-testid=toast-text]").last
    toast.wait_for(timeout=60_000)
    return toast.inner_text()


def open_corpus_tab(page) -> None:
    page.get_by_role("tab", name="Corpus").click()
    page.wait_for_selector("#corpus-path textarea, #corpus-path input", timeout=30_000)


def test_a_very_long_store_folder_is_echoed_short(page):
    open_corpus_tab(page)
    box = page.locator("#corpus-path textarea, #corpus-path input").first
    box.fill("/" + "a" * 5000)
    page.click("#corpus-open")
    text = toast_text(page)
    assert "is 5,001 characters long (limit 4,096)" in text and len(text) < 300, text


def test_an_unreadable_uploaded_store_is_one_line_without_a_server_path(page, tmp_path):
    from mudiff_viz.ui import corpus_tab
    from tests.test_corpus_tab import padded_store_zip

    if corpus_tab.CORPUS_MISSING:
        pytest.skip("needs the corpus extra")
    upload = padded_store_zip(tmp_path / "junk.zip", 100_000, pad="pages/97fdedbec4c2f996/part-00009.parquet", junk=True)
    open_corpus_tab(page)
    page.set_input_files("#corpus-upload input[type=file]", str(upload))
    text = toast_text(page)
    assert "the store's file pages/97fdedbec4c2f996/part-00009.parquet is not a Parquet file that can be read" in text
    assert "/tmp" not in text and "\n" not in text.strip()
