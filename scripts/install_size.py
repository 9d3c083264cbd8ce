"""Install size of a requirements file: the packages it names and everything they pull in, summed
over the files each installed distribution recorded (read from this environment's metadata, so
nothing is downloaded). Torch's CPU wheel is counted as installed here.

    python scripts/install_size.py requirements.txt [--without ray,duckdb] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import re
from importlib import metadata
from pathlib import Path


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def named(requirements: Path) -> list[str]:
    """Top-level package names of a requirements file (``-r`` includes followed)."""
    names = []
    for line in requirements.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        if line.startswith("-r"):
            names += named(requirements.parent / line[2:].strip())
            continue
        names.append(canonical(re.split(r"[<>=!~\[; ]", line, maxsplit=1)[0]))
    return names


def closure(roots: list[str]) -> set[str]:
    """Every installed distribution the roots need (extras left out: what a plain install brings)."""
    seen: set[str] = set()
    todo = list(roots)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        seen.add(name)
        for req in dist.requires or []:
            if "extra ==" in req:
                continue
            marker = req.split(";", 1)[1] if ";" in req else ""
            if "python_version" in marker and "<" in marker and "3.11" not in marker and "3.1" not in marker:
                continue
            todo.append(canonical(re.split(r"[<>=!~\[; (]", req, maxsplit=1)[0]))
    return seen


def size_of(name: str) -> int:
    dist = metadata.distribution(name)
    total = 0
    for f in dist.files or []:
        path = Path(dist.locate_file(f))
        try:
            total += path.stat().st_size
        except OSError:
            continue
    return total


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("requirements")
    ap.add_argument("--json")
    args = ap.parse_args()
    dists = closure(named(Path(args.requirements)))
    sizes = {d: size_of(d) for d in sorted(dists)}
    total = sum(sizes.values())
    biggest = sorted(sizes.items(), key=lambda kv: -kv[1])[:12]
    out = {"requirements": args.requirements, "distributions": len(dists), "total_mb": round(total / 1e6, 1),
           "biggest_mb": {k: round(v / 1e6, 1) for k, v in biggest}}
    print(json.dumps(out, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps({**out, "all_mb": {k: round(v / 1e6, 2) for k, v in sizes.items()}}, indent=1))


if __name__ == "__main__":
    main()
