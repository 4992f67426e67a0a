"""Summarise a py-spy collapsed-stack profile: `python -m benchmarks.stacks FILE [TOP]`.

`--profile-dir` writes one such file per profiled worker. Import-time frames are left out, so
the shares are of the running worker: self time by source file (where the CPU is spent) and
inclusive time by function (which call paths spend it).
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path


def _where(frame: str) -> tuple[str, str]:
    """`func (path/file.py:12)` → (`func (path/file.py)`, `path/file.py`)."""
    name, _, rest = frame.partition(" (")
    path = rest.split(":", 1)[0].rstrip(")")
    return f"{name} ({path})", path


def summarise(path: Path, top: int = 40) -> str:
    by_file: Counter[str] = Counter()
    by_function: Counter[str] = Counter()
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        frames = stack.split(";")
        if any("importlib" in f or "_find_and_load" in f for f in frames):
            continue
        n = int(count)
        total += n
        by_file[_where(frames[-1])[1]] += n
        for function in {_where(f)[0] for f in frames}:
            by_function[function] += n
    if not total:
        return f"{path}: no samples"
    lines = [f"{path}: {total} samples (imports left out)", "", "self time by file:"]
    lines += [f"{100 * c / total:5.1f}%  {f}" for f, c in by_file.most_common(top)]
    lines += ["", "inclusive time by function:"]
    lines += [f"{100 * c / total:5.1f}%  {f}" for f, c in by_function.most_common(top)]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    print(summarise(Path(argv[0]), int(argv[1]) if len(argv) > 1 else 40))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
