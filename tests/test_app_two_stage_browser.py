"""The two-stage parse in the app, in Chromium, on a tiny random MinerU-Diffusion checkpoint in the
official layout (written by tests/test_real_models.py's writer): choose the model, the layout
mode, run; the result is a layout pass recorded as its own region, on one clock with any blocks."""

from __future__ import annotations

import pytest

from tests.ui_support import app_page, launched_app, make_tiny_twins, require_chromium, run_and_wait

require_chromium()


@pytest.fixture(scope="module")
def two_stage_app(tmp_path_factory):
    from tests.test_real_models import write_diffusion_checkpoint

    ckpt = write_diffusion_checkpoint(tmp_path_factory.mktemp("mineru-diffusion-tiny"))
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


def test_the_app_runs_a_two_stage_decode_of_an_official_layout_checkpoint(browser, two_stage_app, tmp_path):
    url, ckpt = two_stage_app
    with app_page(browser, url) as pg:
        choose(pg, "decode-model", ckpt.name)
        choose(pg, "decode-mode", "layout")
        box = pg.locator("#decode-max-new-tokens input[type=number]")
        box.fill("16")
        box.press("Tab")
        run_and_wait(pg, "#decode-run", timeout=300_000)
        status = pg.inner_text("#decode-status")
        import os
        pg.screenshot(path=os.environ.get("MUDIFF_SHOT", str(tmp_path / "two-stage.png")), full_page=True)
        assert "mineru-diffusion" in status, status
        href = pg.eval_on_selector_all("#decode-downloads a", "as => as.map(a => a.href).find(h => h.includes('.trace.json'))")
        trace = pg.request.get(href).json()
        assert trace["params"]["mode"] == "layout" and trace["params"]["layout_prompt"] == "detection"
        assert trace["regions"][0]["kind"] == "layout" and trace["params"]["task_tokens"]["layout"] == 16
        assert len(trace["regions"]) == 1 + trace["params"]["layout_blocks"]  # the random model's answer: any blocks
