"""The architecture as tests: imports go one way through the layers, with no cycles, and a new
strategy or model backend plugs in through the public registries alone (docs/architecture.md)."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent

# What each package may import (itself included). Views are pure functions of a Trace: core only.
ALLOWED = {
    "mudiff_viz.core": {"mudiff_viz.core"},
    "mudiff_viz.inputs": {"mudiff_viz.core", "mudiff_viz.inputs"},
    "mudiff_viz.views": {"mudiff_viz.core", "mudiff_viz.views"},
    "models": {"mudiff_viz.core", "models"},  # backends receive their regions: they never reach into inputs
    "mudiff_viz.decoding": {"mudiff_viz.core", "mudiff_viz.inputs", "models", "mudiff_viz.decoding"},
    "mudiff_viz.probes": {"mudiff_viz.core", "mudiff_viz.inputs", "models", "mudiff_viz.decoding", "mudiff_viz.views",
                          "mudiff_viz.probes"},
    "mudiff_viz.bench": {"mudiff_viz.core", "mudiff_viz.inputs", "models", "mudiff_viz.decoding", "mudiff_viz.views",
                         "mudiff_viz.probes", "mudiff_viz.bench"},
    "mudiff_viz.corpus": {"mudiff_viz.core", "mudiff_viz.inputs", "models", "mudiff_viz.decoding", "mudiff_viz.views",
                          "mudiff_viz.probes", "mudiff_viz.corpus"},
    # training, evaluation and research tools of the embedded pairs: on top of the runtime, never under it
    "nano_training": {"mudiff_viz.core", "mudiff_viz.inputs", "models", "mudiff_viz.decoding", "mudiff_viz.views",
                      "mudiff_viz.probes", "mudiff_viz.bench", "nano_training"},
}
OURS = ("mudiff_viz", "models", "nano_training")
TOP = {"mudiff_viz.ui", "mudiff_viz.cli", "mudiff_viz.workers", "mudiff_viz.notebook", "mudiff_viz", "mudiff_viz.__main__"}  # entry points: anything below


def _module(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    """Every project module a file imports, at any depth (function-level imports count too)."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level:
            raise AssertionError(f"{path}: relative import (use absolute imports)")
    return {m for m in out if m.split(".")[0] in OURS}


def _graph() -> dict[str, set[str]]:
    files = [p for top in OURS for p in (ROOT / top).rglob("*.py")]
    modules = {_module(p): p for p in files}
    graph = {}
    for name, path in modules.items():
        graph[name] = {m for m in _imports(path) if m in modules and m != name}
    return graph


def _package(module: str) -> str:
    if module.split(".")[0] in ("models", "nano_training"):
        return module.split(".")[0]
    parts = module.split(".")
    return ".".join(parts[:2]) if len(parts) > 1 else module


def test_imports_follow_the_layers():
    bad = []
    for module, deps in _graph().items():
        pkg = _package(module)
        if pkg in TOP:  # entry points; the app and the CLI stay independent of each other
            bad += [f"{module} -> {d}" for d in deps if {pkg, _package(d)} == {"mudiff_viz.ui", "mudiff_viz.cli"}]
            continue
        allowed = ALLOWED[pkg]
        bad += [f"{module} -> {d}" for d in deps if _package(d) not in allowed]
    assert bad == []


def test_no_import_cycles():
    graph = _graph()
    state: dict[str, int] = {}
    cycles = []

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        for dep in graph[node]:
            if state.get(dep) == 1:
                cycles.append(stack[stack.index(dep):] + [dep])
            elif dep not in state:
                visit(dep, stack + [dep])
        state[node] = 2

    for node in graph:
        if node not in state:
            visit(node, [node])
    assert cycles == []


def _unit(module: str) -> str:
    """A module's package, one level finer than the layers: models.nano, models.nano_char, mudiff_viz.ui, nano_training."""
    parts = module.split(".")
    return parts[0] if parts[0] == "nano_training" or len(parts) == 1 else ".".join(parts[:2])


def test_runtime_never_imports_the_training_package():
    """The app, the CLI and the backends load shipped weights; training code stays out of them."""
    bad = [f"{m} -> {d}" for m, deps in _graph().items() if not m.startswith("nano_training")
           for d in deps if d.startswith("nano_training")]
    assert bad == []


def test_no_package_level_cycles():
    """No two packages import each other, even through different modules (models.nano <-> models.nano_char was one)."""
    edges: dict[str, set[str]] = {}
    for module, deps in _graph().items():
        edges.setdefault(_unit(module), set()).update(_unit(d) for d in deps if _unit(d) != _unit(module))
    cycles = []

    def reach(start: str) -> set[str]:
        seen, todo = set(), list(edges.get(start, ()))
        while todo:
            node = todo.pop()
            if node not in seen:
                seen.add(node)
                todo.extend(edges.get(node, ()))
        return seen

    for unit in edges:
        cycles += [f"{unit} <-> {other}" for other in edges[unit] if unit in reach(other)]
    assert sorted(cycles) == []


def test_a_new_strategy_is_one_registered_function():
    """Registered once, a strategy is a valid --strategy for the decoder, the CLI and the app."""
    from mudiff_viz.decoding.diffusion import decode_diffusion
    from mudiff_viz.decoding.settings import KNOB, DecodeParams
    from mudiff_viz.decoding.strategies import STRATEGIES, CommitInputs, register_strategy, top_by_score

    @register_strategy("rightmost_first", "commit the quota from the right end of the block")
    def rightmost_first(step: CommitInputs) -> torch.Tensor:
        pos = torch.arange(step.masked.shape[-1], dtype=torch.float32).expand(step.masked.shape)
        return top_by_score(torch.where(step.masked, pos, torch.full_like(pos, -1.0)), step.quota)

    try:
        from mudiff_viz.cli.main import build_parser
        from tests.fixed_backend import FixedBackend, FixedPage

        KNOB["strategy"].check("rightmost_first")
        args = build_parser().parse_args(["decode", "x.png", "--strategy", "rightmost_first", "--out", "t.json"])
        assert args.strategy == "rightmost_first"
        backend = FixedBackend(seed=5)
        trace = decode_diffusion(backend, FixedPage(), backend.regions(None),
                                 DecodeParams(block_length=8, steps=8, strategy="rightmost_first", max_new_tokens=8))
        first = [t.commit_forward for t in trace.regions[0].tokens[:8]]
        assert first == sorted(first, reverse=True)  # right to left, one per step
    finally:
        del STRATEGIES["rightmost_first"]


class ToyBackend:
    """A model backend in one class: a 'reader' whose logits spell a fixed word, then stop."""

    WORD = "toy"

    def __init__(self, model_dir: Path, device: str, spec: str) -> None:
        from models.base import Backend

        class _Toy(Backend):
            kind = "diffusion"
            name, params_m, mask_id = "toy", 0.0, 0
            stop_ids = frozenset({1})
            device = torch.device("cpu")

            def regions(self, page):
                from mudiff_viz.core.types import Region

                return [Region(bbox=(0, 0, page.width, page.height))]

            def encode(self, page, regions, block_length=None):
                return {"start": 0}

            def token_text(self, i):
                return {0: "<mask>", 1: "<eos>"}.get(i, chr(i))

            def detokenize(self, ids):
                return "".join(chr(i) for i in ids if i > 1)

            def block_logits(self, ctx, block, rows):
                target = [ord(c) for c in ToyBackend.WORD] + [1] * 64
                n = block.shape[1]
                logits = torch.full((block.shape[0], n, 128), -10.0)
                for j in range(n):
                    logits[:, j, target[ctx["start"] + j]] = 10.0
                return logits

            def commit_block(self, ctx, block, rows):
                ctx["start"] += block.shape[1]

        self.backend = _Toy()
        self.backend.spec = spec


def test_a_new_model_backend_is_one_registered_factory(tmp_path):
    from PIL import Image

    from models import registry
    from mudiff_viz.decoding.pipeline import decode_page
    from mudiff_viz.decoding.settings import DecodeParams
    from mudiff_viz.inputs.pages import load_page

    registry.register_backend("toy", lambda d, device, spec: ToyBackend(d, device, spec).backend)
    try:
        model_dir = tmp_path / "toy-model"
        model_dir.mkdir()
        (model_dir / "config.json").write_text(json.dumps({"model_type": "toy"}))
        Image.new("RGB", (40, 20), "white").save(tmp_path / "page.png")
        trace = decode_page(load_page(tmp_path / "page.png"), model=str(model_dir), decoder="diffusion",
                            params=DecodeParams(block_length=4, steps=4, max_new_tokens=8))
        assert trace.text == "toy" and trace.model.name == "toy" and trace.model.mask_id == 0
    finally:
        del registry.BACKEND_TYPES["toy"]
        registry._cache.clear()


def test_the_app_and_the_cli_decode_through_the_public_api():
    """One code path for a page decode (issue 31): the app and the CLI call ``mv.decode``
    (mudiff_viz/notebook/api.py), never the pipeline underneath it."""
    bad = []
    for top in ("ui", "cli"):
        for path in (ROOT / "mudiff_viz" / top).rglob("*.py"):
            if any(m.endswith("pipeline.decode_page") for m in _imports(path)):
                bad.append(str(path.relative_to(ROOT)))
    assert bad == []
