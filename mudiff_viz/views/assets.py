"""The player's script: the ES modules of assets/player/src joined into one classic script.

Three consumers run the player and none of them can load module files: Gradio runs ``js_on_load``
as a function body, the offline replay is one HTML file whose CSP allows inline scripts only, and
the notebook widget's ES module is one string. So the modules are joined here: dependencies first
(the order their imports give, from ``main.js``), ``import`` lines dropped, ``export`` keywords
removed, all inside one function scope, which is what the single player.js used to be. Every
top-level name is therefore unique across the modules (:func:`module_problems` checks it, with
every import naming a real export). docs/player.md has the module map.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

PLAYER_DIR = Path(__file__).resolve().parents[2] / "assets" / "player"
SRC_DIR = PLAYER_DIR / "src"
ENTRY = "main.js"

IMPORT = re.compile(r'^import\s*\{([^}]*)\}\s*from\s*"\./([\w-]+\.js)";\s*$', re.M)
EXPORT = re.compile(r"^export (?=(?:const|let|function|class) )", re.M)


def imports_of(source: str) -> list[tuple[list[str], str]]:
    """(names, module file) of each ``import { a, b } from "./x.js";`` line."""
    return [([n.strip() for n in names.split(",") if n.strip()], mod) for names, mod in IMPORT.findall(source)]


def module_order(src_dir: Path = SRC_DIR, entry: str = ENTRY) -> list[str]:
    """The modules reachable from the entry, each after the modules it imports (a cycle is refused)."""
    order: list[str] = []
    state: dict[str, str] = {}

    def visit(name: str, path: tuple[str, ...]) -> None:
        if state.get(name) == "done":
            return
        if state.get(name) == "open":
            raise ValueError(f"player modules import each other in a cycle: {' -> '.join(path + (name,))}")
        state[name] = "open"
        for _, dep in imports_of((src_dir / name).read_text(encoding="utf-8")):
            visit(dep, path + (name,))
        state[name] = "done"
        order.append(name)

    visit(entry, ())
    return order


def declared_names(source: str) -> list[str]:
    """Top-level names a module declares (``const A = 0, B = 1`` declares both)."""
    names = []
    for line in source.splitlines():
        m = re.match(r"(?:export )?(const|let|function|class) +([A-Za-z_$][\w$]*)", line)
        if not m:
            continue
        names.append(m.group(2))
        if m.group(1) in ("const", "let"):
            names += re.findall(r",\s*([A-Za-z_$][\w$]*)\s*=", line)
    return names


def exported_names(source: str) -> list[str]:
    return [n for line in source.splitlines() if line.startswith("export ") for n in declared_names(line)]


def module_problems(src_dir: Path = SRC_DIR, entry: str = ENTRY) -> list[str]:
    """What would break the join or a native module load: an import of a name its module does not
    export, a top-level name declared by two modules, a module that uses another's name without
    importing it, a file the entry never reaches."""
    order = module_order(src_dir, entry)
    sources = {n: (src_dir / n).read_text(encoding="utf-8") for n in order}
    exports = {n: set(exported_names(s)) for n, s in sources.items()}
    problems = []
    owner: dict[str, str] = {}
    for name, src in sources.items():
        for d in declared_names(src):
            if d in owner:
                problems.append(f"{d} is declared by both {owner[d]} and {name}")
            owner.setdefault(d, name)
    for name, src in sources.items():
        imported = set()
        for names, dep in imports_of(src):
            for n in names:
                imported.add(n)
                if n not in exports[dep]:
                    problems.append(f"{name} imports {n} from {dep}, which does not export it")
        body = IMPORT.sub("", src)
        code = re.sub(r"//[^\n]*|/\*.*?\*/|\"(?:\\.|[^\"\\])*\"|`(?:\\.|[^`\\])*`", "", body, flags=re.S)
        mine = set(declared_names(src))
        for other, names in exports.items():
            if other == name:
                continue
            for n in names - mine - imported:
                if re.search(rf"(?<![\w$.]){re.escape(n)}(?![\w$])", code):
                    problems.append(f"{name} uses {n} (exported by {other}) without importing it")
    stray = sorted(p.name for p in src_dir.glob("*.js") if p.name not in sources)
    problems += [f"{s} is not imported by any module reached from {entry}" for s in stray]
    return problems


def join_modules(src_dir: Path = SRC_DIR, entry: str = ENTRY) -> str:
    """The modules as one classic script (see the module docstring)."""
    parts = []
    for name in module_order(src_dir, entry):
        src = (src_dir / name).read_text(encoding="utf-8")
        src = EXPORT.sub("", IMPORT.sub("", src))
        parts.append(f"// ==== {name} ====\n{src.strip()}\n")
    return ('(function () {\n"use strict";\n' + "\n".join(parts) + "})();\n")


@lru_cache(maxsize=4)
def _cached(stamp: tuple) -> str:
    return join_modules()


def player_js() -> str:
    """The joined player script (rebuilt when a module file changes)."""
    stamp = tuple((p.name, p.stat().st_mtime_ns, p.stat().st_size) for p in sorted(SRC_DIR.glob("*.js")))
    return _cached(stamp)
