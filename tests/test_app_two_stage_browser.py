"""The two-stage parse in the app, in Chromium, on a tiny MinerU-Diffusion checkpoint in the
official layout whose weights script its layout answer (tests/test_real_models.py
write_layout_checkpoint): the nano pairs are offered page mode only, and say why; choose the
checkpoint and the layout mode, run; the layout pass is a region of its own on one clock with the
blocks it found, their boxes are drawn on the page image, and the region bar moves between them.

``MUDIFF_SHOT_DIR`` (a folder): the test also saves screenshots of the result at 1440x1000 and
390x844 there (two-stage-1440.png, two-stage-390.png), and one half way through the layout pass
(two-stage-1440-layout-pass.png)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.ui_support import app_page, launched_app, make_tiny_twins, open_advanced, require_chromium, run_and_wait
from tests.ui_support import region_view as shown

require_chromium()


@pytest.fixture(scope="module")
def two_stage_app(tmp_path_factory):
    from tests.test_real_models import write_layout_checkpoint

    ckpt = write_layout_checkpoint(tmp_path_factory.mktemp("mineru-diffusion-layout"))
    mp = pytest.MonkeyPatch()
    mp.setenv("MUDIFF_MODELS", str(ckpt))
    try:
        with launched_app(make_tiny_twins(tmp_path_factory.mktemp("models"))) as url:
            yield url, ckpt
    finally:
        mp.undo()


def choose(pg, elem_id: str, option: str) -> None:
    pg.click(f"#{elem_id} input")
    pg.locator("[role=option]", has_text=option).first.click()
    pg.wait_for_timeout(300)


def fill(pg, elem_id: str, value: int) -> None:
    box = pg.locator(f"#{elem_id} input[type=number]")
    box.fill(str(value))
    box.press("Tab")


def offered(pg, elem_id: str) -> tuple[bool, str, str]:
    """(interactive, value, info line) of a dropdown as the browser shows it."""
    pg.wait_for_timeout(300)
    return (pg.is_enabled(f"#{elem_id} input"), pg.input_value(f"#{elem_id} input"), pg.inner_text(f"#{elem_id}"))


def blocks_on_image(pg) -> list[dict]:
    return pg.evaluate("""() => {
        const img = document.querySelector('#player .mp-page-img').getBoundingClientRect();
        return Array.from(document.querySelectorAll('#player rect.mp-block')).map(r => {
            const b = r.getBoundingClientRect();
            return {kind: r.dataset.kind, w: b.width, h: b.height,
                    inside: b.left >= img.left - 1 && b.right <= img.right + 1 && b.top >= img.top - 1 && b.bottom <= img.bottom + 1};
        });
    }""")


def test_the_app_runs_a_two_stage_decode_with_layout_boxes_and_a_player_per_region(browser, two_stage_app, tmp_path):
    from mudiff_viz.ui.controls import LAYOUT_TASK_NOTE, NANO_NOTE, NANO_TASK_NOTE

    url, ckpt = two_stage_app
    with app_page(browser, url) as pg:
        open_advanced(pg)
        # the first model is the nano pair: page mode and the text task only, and the controls say why
        assert offered(pg, "decode-mode")[:2] == (False, "page") and NANO_NOTE in offered(pg, "decode-mode")[2]
        assert offered(pg, "decode-task")[:2] == (False, "text") and NANO_TASK_NOTE in offered(pg, "decode-task")[2]
        choose(pg, "decode-model", ckpt.name)
        assert offered(pg, "decode-mode")[0] and NANO_NOTE not in offered(pg, "decode-mode")[2]
        choose(pg, "decode-mode", "layout")
        assert offered(pg, "decode-task")[0] is False and LAYOUT_TASK_NOTE in offered(pg, "decode-task")[2]
        for elem_id in ("decode-block-length", "decode-steps", "decode-max-new-tokens"):
            fill(pg, elem_id, 8)
        run_and_wait(pg, "#decode-run", timeout=300_000)
        status = pg.inner_text("#decode-status")
        assert "mineru-diffusion" in status, status
        href = pg.eval_on_selector_all("#decode-downloads a", "as => as.map(a => a.href).find(h => h.includes('.trace.json'))")
        trace = pg.request.get(href).json()
        assert trace["params"]["mode"] == "layout" and trace["params"]["layout_prompt"] == "detection"
        assert trace["regions"][0]["kind"] == "layout" and trace["params"]["task_tokens"]["layout"] == 8
        assert [r["kind"] for r in trace["regions"]] == ["layout", "title", "text", "list", "text"]
        assert trace["params"]["layout_blocks"] == 4 and trace["params"]["region_tasks"] == ["layout", "text", "text", None, "text"]

        # the layout boxes, drawn on the page image
        boxes = blocks_on_image(pg)
        assert [b["kind"] for b in boxes] == ["title", "text", "list", "text"]
        assert all(b["inside"] and b["w"] > 5 and b["h"] > 5 for b in boxes), boxes
        # the player moves between regions: the layout pass, then the title, each on its own frames
        pg.click("#player .mp-region-next")
        layout = shown(pg)
        assert layout["pressed"] == layout["line"] == layout["box"] == ["0"] and "Layout pass" in layout["note"]
        pg.click("#player .mp-region-next")
        title = shown(pg)
        assert title["pressed"] == title["line"] == title["box"] == ["1"] and title["note"].startswith("Block 1 of 4 · title")
        assert title["clock"] != layout["clock"]
        shots = os.environ.get("MUDIFF_SHOT_DIR")
        if shots:
            save_screenshots(pg, Path(shots))
        # a preset puts the mode back to page: the task is on again
        pg.click("#decode-preset-defaults")
        assert offered(pg, "decode-mode")[:2] == (True, "page") and offered(pg, "decode-task")[0] is True
        # back to the nano pair: the layout mode it cannot run is set back to page, and off
        choose(pg, "decode-mode", "layout")
        choose(pg, "decode-model", "nano")
        assert offered(pg, "decode-mode")[:2] == (False, "page")


def save_screenshots(pg, folder: Path) -> None:
    """The result at 1440x1000 and 390x844, the title chosen again at each width (its line's place
    in the text depends on the width), the player at the top of the screen (on a phone: the region
    bar, under the player's sticky controls)."""
    folder.mkdir(parents=True, exist_ok=True)
    for w, h in ((1440, 1000), (390, 844)):
        pg.set_viewport_size({"width": w, "height": h})
        pg.wait_for_timeout(500)
        pg.click("#player .mp-region-chip[data-region='1']")
        top = "#player" if w > 900 else "#player .mp-stages"
        pg.eval_on_selector(top, "e => { e.scrollIntoView({block: 'start'}); window.scrollBy(0, e.id ? 0 : -110); }")
        pg.wait_for_timeout(300)
        pg.screenshot(path=str(folder / f"two-stage-{w}.png"))
    # the layout pass half way: its own decode on screen, the boxes not found yet
    pg.set_viewport_size({"width": 1440, "height": 1000})
    pg.click("#player .mp-region-chip[data-region='0']")
    for _ in range(4):
        pg.click("#player .mp-btn.step-back")
    pg.eval_on_selector("#player", "e => e.scrollIntoView({block: 'start'})")
    pg.wait_for_timeout(300)
    pg.screenshot(path=str(folder / "two-stage-1440-layout-pass.png"))
    pg.set_viewport_size({"width": 1400, "height": 1000})
