"""Adds figures to gpu-check.json (scripts/gpu-check.sh): ``FILE KEY VALUE [KEY VALUE...]``
where VALUE is a JSON file, a number or text; ``FILE --has-gpu`` exits 0 when the GPU
suite found a GPU (its ``gpu`` entry holds no error). A main job's exit code is also
written as its verdict (vgpu/exitcodes.py)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

VERDICTS = {0: "PASS", 3: "FAIL", 4: "INCONCLUSIVE", 5: "nothing to judge against",
            1: "could not run", 2: "bad input", 124: "stopped by the time limit"}


def value_of(text: str) -> Any:
    path = Path(text)
    if path.suffix == ".json" and path.exists():
        return json.loads(path.read_text())
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def main(argv: list[str]) -> int:
    path = Path(argv[0])
    document: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {}
    if argv[1:] == ["--has-gpu"]:
        gpu = document.get("gpu") or {}
        return 0 if gpu and "error" not in gpu else 1
    pairs = argv[1:]
    if len(pairs) % 2:
        print(f"usage: {Path(__file__).name} FILE KEY VALUE [KEY VALUE...]", file=sys.stderr)
        return 2
    for key, text in zip(pairs[::2], pairs[1::2], strict=True):
        document[key] = value_of(text)
        if key == "main_job_exit":
            document["main_job_verdict"] = VERDICTS.get(int(text), f"exit {text}")
    path.write_text(json.dumps(document, indent=2, sort_keys=True, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
