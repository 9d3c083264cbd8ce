"""The player's ES modules (assets/player/src) and the one script they are joined into.

What ships is the joined script (mudiff_viz/views/assets.py); the browser tests run it. These tests
check the join itself: the module graph is whole, the joined script parses, and the modules still
load as native ES modules (Node), so neither form can drift from the other.
"""

from __future__ import annotations

import shutil
import subprocess

import pytest

from mudiff_viz.views.assets import SRC_DIR, join_modules, module_order, module_problems, player_js

NODE = shutil.which("node")


def test_module_graph_is_whole():
    assert module_problems() == []
    order = module_order()
    assert order[-1] == "main.js" and sorted(order) == sorted(p.name for p in SRC_DIR.glob("*.js"))
    # each module comes after every module it imports
    assert order.index("states.js") < order.index("model.js") < order.index("player.js")


def test_joined_script_has_no_module_syntax_and_every_module():
    js = player_js()
    assert js == join_modules()
    assert "\nimport " not in js and "\nexport " not in js
    for name in module_order():
        assert f"// ==== {name} ====" in js
    assert "globalThis.MudiffPlayer" in js


@pytest.mark.skipif(NODE is None, reason="node is not installed")
def test_joined_script_parses_and_modules_load_natively(tmp_path):
    path = tmp_path / "player.js"
    path.write_text(player_js(), encoding="utf-8")
    subprocess.run([NODE, "--check", str(path)], check=True, capture_output=True)
    # the same modules as ES modules: imports resolve and the entry defines MudiffPlayer
    out = subprocess.run(
        [NODE, "--input-type=module", "-e",
         f"await import({str((SRC_DIR / 'main.js').as_uri())!r}); "
         "console.log(typeof globalThis.MudiffPlayer.mount, globalThis.MudiffPlayer.STATE_NAMES.length)"],
        check=True, capture_output=True, text=True,
    )
    assert out.stdout.split()[0] == "function" and int(out.stdout.split()[1]) >= 6


def test_problems_are_found(tmp_path):
    (tmp_path / "a.js").write_text('export const A = 1;\nexport function f() { return A; }\n')
    (tmp_path / "b.js").write_text('import { A, g } from "./a.js";\nexport const B = A + f();\n')
    (tmp_path / "main.js").write_text('import { B } from "./b.js";\nconst A = 2;\nglobalThis.x = B;\n')
    (tmp_path / "stray.js").write_text("export const S = 0;\n")
    problems = module_problems(tmp_path, "main.js")
    assert "b.js imports g from a.js, which does not export it" in problems
    assert "b.js uses f (exported by a.js) without importing it" in problems
    assert "A is declared by both a.js and main.js" in problems
    assert "stray.js is not imported by any module reached from main.js" in problems
    (tmp_path / "a.js").write_text('import { B } from "./b.js";\nexport const A = 1;\n')
    with pytest.raises(ValueError, match="cycle: main.js -> b.js -> a.js -> b.js"):
        module_order(tmp_path, "main.js")


@pytest.mark.skipif(NODE is None, reason="node is not installed")
def test_the_notebook_widgets_module_parses_as_an_es_module(tmp_path):
    from mudiff_viz.notebook.widget import widget_esm

    path = tmp_path / "widget.mjs"  # the joined script, then widget.js with its export default
    path.write_text(widget_esm(), encoding="utf-8")
    subprocess.run([NODE, "--check", str(path)], check=True, capture_output=True)
    out = subprocess.run([NODE, "--input-type=module", "-e",
                          f"const m = await import({path.as_uri()!r}); console.log(typeof m.default.render, typeof globalThis.MudiffPlayer.mount)"],
                         check=True, capture_output=True, text=True)
    assert out.stdout.split() == ["function", "function"]
