"""An imported release output (mudiff_viz/decoding/release_import.py) in the player, in a real browser.

The trace has commits and no guesses: the token card says so and shows no confidence, the clock
runs over the release's forwards, and the text arrives as ``step_map`` says.
"""

from __future__ import annotations

import pytest
from PIL import Image

from tests.ui_support import require_chromium

require_chromium()


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    import mudiff_viz as mv
    from tests.test_release_import import ANSWER, L, make_kit, release_generate

    kit = make_kit(tmp_path_factory.mktemp("release_browser"))
    ids = kit["ids"]
    answer = kit["tok"].encode(ANSWER, add_special_tokens=False).ids
    tokens, step_map, step_time = release_generate(answer, ids["<|im_end|>"], ids["<|endoftext|>"], seed=5)
    trace = mv.from_release(tokens, step_map, step_time=step_time, image=kit["page"], tokenizer=kit["ckpt"],
                            block_length=L)
    return trace, Image.open(kit["page"]), step_map


def test_the_card_of_an_imported_token_shows_its_commit_and_no_confidence(browser, tmp_path, imported):
    from mudiff_viz.views.export import standalone_html
    from mudiff_viz.views.page_image import image_data_url

    trace, img, step_map = imported
    path = tmp_path / "imported.html"
    path.write_text(standalone_html(trace, image_data_url(img)), encoding="utf-8")
    ctx = browser.new_context(viewport={"width": 1440, "height": 1000})
    pg = ctx.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.goto(path.as_uri())
    pg.wait_for_selector("#player .token")
    n = max(step_map)
    assert pg.eval_on_selector("#player .mp-scrub", "el => Number(el.max)") == n
    scrub = "(el, v) => { el.value = v; el.dispatchEvent(new Event('input', {bubbles: true})); }"
    pg.eval_on_selector("#player .mp-scrub", scrub, n // 2)  # mid-decode: the tokens committed so far, no ghost
    done = sum(1 for p, s in enumerate(step_map[:trace.n_tokens]) if s <= n // 2)
    assert pg.locator("#player .mp-text .token.st-done, #player .mp-text .token.st-now").count() == done
    assert pg.locator("#player .mp-text .st-ghost").count() == 0
    assert pg.locator("#player .mp-text .token.low").count() == 0  # no confidence, so none marked low
    assert pg.eval_on_selector("#player .mp-colour", "el => Array.from(el.options).map((o) => o.value)") == ["commit"]
    pg.eval_on_selector("#player .mp-scrub", scrub, n)
    token = pg.locator("#player .mp-text .token.st-done").nth(2)
    i = int(token.get_attribute("data-i"))
    token.click()
    card = pg.inner_text("#player .mp-inspect.pinned")
    assert f"committed at forward {step_map[i]} " in card
    assert "Imported from the release generate" in card and "confidence" not in card.split("Imported")[0]
    assert pg.locator("#player .mp-inspect.pinned .mp-topk li").count() == 0
    assert pg.locator("#player .mp-text .st-ghost").count() == 0
    ctx.close()
    assert not errors, errors
