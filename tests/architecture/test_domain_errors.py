"""Domain modules tell bad input in their own terms: an input error outside the command
line layer (vgpu/cli/) is never labelled with a flag (`InputError.single(file, "--flag",
...)`); a ParameterError names the parameter and the CLI names its flag. The modules listed
in STILL_LABELLED_WITH_FLAGS predate the rule and are to move; no other may join them."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
STILL_LABELLED_WITH_FLAGS = {
    "vgpu/results/views/allreduce_view.py", "vgpu/results/export/mlperf_export.py",
    "vgpu/results/views/runview.py", "vgpu/results/store/result_store.py",
    "vgpu/revalidate/hosts.py",
    "vgpu/revalidate/preflight.py", "vgpu/site.py", "vgpu/train/report.py",
}


def _flag_labelled(path: Path) -> list[str]:
    """Each `X.single(file, "--...", ...)` call in the module, as line: label."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr == "single" and len(node.args) >= 2:
            label = node.args[1]
            if isinstance(label, ast.Constant) and str(label.value).startswith("--"):
                out.append(f"{node.lineno}: {label.value}")
    return out


def test_no_domain_module_labels_an_input_error_with_a_flag() -> None:
    labelled = {str(p.relative_to(ROOT)): found for p in sorted((ROOT / "vgpu").rglob("*.py"))
                if p.relative_to(ROOT).parts[1] != "cli" and (found := _flag_labelled(p))}
    assert set(labelled) <= STILL_LABELLED_WITH_FLAGS, {
        k: v for k, v in labelled.items() if k not in STILL_LABELLED_WITH_FLAGS}
    assert {"vgpu/vsphere/preflight/saved.py", "vgpu/nvml/preconditions.py",
            "vgpu/vsphere/apply/window.py", "vgpu/sim/hostupgrade.py"}.isdisjoint(labelled)


def test_the_scan_finds_a_flag_label() -> None:
    sample = ROOT / "vgpu" / "site.py"
    assert any("--inventory" in line for line in _flag_labelled(sample))
