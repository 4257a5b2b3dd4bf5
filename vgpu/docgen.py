"""Generate the reference pages docs/scenarios.md, docs/inventory.md and docs/mig.md from
the models and the MIG catalogue, so the docs cannot drift from the code.

    python -m vgpu.docgen            # rewrite the pages
    python -m vgpu.docgen --check    # exit 1 if a page is out of date
"""

from __future__ import annotations

import sys
import types
import typing
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from vgpu import mig
from vgpu.model.inventory import Inventory
from vgpu.model.scenario import InferenceWorkload, Scenario, TrainingWorkload

DOCS = Path(__file__).resolve().parent.parent / "docs"


def _type_name(annotation: Any) -> str:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Literal:
        return " \\| ".join(f"`{a}`" for a in args)
    if origin in (typing.Union, types.UnionType):
        parts = [_type_name(a) for a in args if a is not type(None)]
        return " \\| ".join(parts) + (" or null" if type(None) in args else "")
    if origin is typing.Annotated:
        return _type_name(args[0])
    if origin in (list, tuple):
        inner = ", ".join(_type_name(a) for a in args if a is not Ellipsis)
        return f"list of {inner}"
    if origin is dict:
        return f"map {_type_name(args[0])} -> {_type_name(args[1])}"
    if isinstance(annotation, type):
        return annotation.__name__
    return str(annotation)


def _default(field: Any) -> str:
    if field.is_required():
        return "**required**"
    if field.default_factory is not None:
        value = field.default_factory()
        if isinstance(value, BaseModel):
            return "see its table"
        return f"`{value}`" if value not in ([], {}) else "empty"
    if field.default is PydanticUndefined or field.default is None:
        return "unset"
    return f"`{field.default}`"


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    found: list[type[BaseModel]] = []
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    for arg in typing.get_args(annotation):
        found += _models_in(arg)
    return found


def model_reference(root: type[BaseModel], extra: list[type[BaseModel]] = ()) -> str:  # type: ignore[assignment]
    out: list[str] = []
    queue: list[type[BaseModel]] = [root, *extra]
    seen: set[type[BaseModel]] = set()
    while queue:
        model = queue.pop(0)
        if model in seen:
            continue
        seen.add(model)
        doc = (model.__doc__ or "").strip().splitlines()
        out.append(f"### `{model.__name__}`\n")
        if doc:
            out.append(" ".join(line.strip() for line in doc) + "\n")
        out.append("| key | type | default | meaning |\n|---|---|---|---|")
        for name, field in model.model_fields.items():
            desc = (field.description or "").replace("|", "\\|")
            out.append(f"| `{name}` | {_type_name(field.annotation)} | {_default(field)} "
                       f"| {desc} |")
            queue += [m for m in _models_in(field.annotation) if m not in seen]
        out.append("")
    return "\n".join(out)


def mig_reference() -> str:
    out = ["# MIG catalogue", "",
           "Generated from `vgpu/mig/catalogue.py` (`python -m vgpu.docgen`), the single source of "
           "truth for profile names, vGPU type names and NVML ids.", ""]
    for model in mig.GPU_MODELS.values():
        out.append(f"## {model.key} ({model.display_name})\n")
        out.append(f"{model.compute_slices} compute slices, {model.memory_slices} memory "
                   f"slices; vGPU boards {', '.join(model.board_codes)}; PCI device ids "
                   f"{', '.join(f'0x{d:04X}' for d in model.pci_device_ids)}; 64-bit MMIO "
                   f"for passthrough {model.mmio_size_gb} GB.")
        if model.placements_assumed:
            out.append("\nPlacements are assumed equal to H100's (no published capture); "
                       "check them with `vgpu mig verify-catalogue` on the hardware.")
        out.append("\n| profile | vGPU type | NVML index | NVML id | compute | memory slices "
                   "| max | starts |\n|---|---|---|---|---|---|---|---|")
        for p in model.profiles:
            s = p.shape
            out.append(f"| `{p.name}` | `{p.vgpu_type(model.board)}` | {s.nvml_index} | "
                       f"{s.nvml_id} | {s.compute_slices} | {s.memory_slices} | "
                       f"{s.max_count} | {', '.join(map(str, s.starts))} |")
        out.append(f"\nTime-sliced types: {', '.join(model.timesliced_types())}.\n")
    return "\n".join(out)


SCENARIO_INTRO = """# Scenario reference

A scenario says what to build and what to measure: the VMs (or, with
`platform: bare-metal`, the MIG instances of a bare-metal host), their vGPUs, VM settings,
the guest stack, the workloads, repeats, the baseline and tolerances. `vgpu schema
scenario` prints the JSON Schema. Unknown keys are errors. The catalogue in `scenarios/`
holds the lab studies (`vgpu scenarios`).

vGPU strings accept every common spelling: `1g.10gb`, `MIG 1g.10gb`, `A100D-1-10C`,
`grid_a100d-1-10c`, the lab studies' `nvidia-1-10c`; time-sliced types `A100D-20C`; and
`passthrough` for a whole GPU. Names derive from one catalogue ([mig.md](mig.md)).

Example (scenario 6 of lab study A):

```yaml
id: 6
name: mig-4g-2g-1g
gpu: A100-80GB
vms:
  - {name: s6-4g, vcpu: 32, memory_gb: 64, vgpus: [nvidia-4-40c]}
  - {name: s6-2g, vcpu: 32, memory_gb: 64, vgpus: [nvidia-2-20c]}
  - {name: s6-1g, vcpu: 32, memory_gb: 64, vgpus: [nvidia-1-10c]}
vm_settings: {p2p: true}
workloads:
  - {name: resnet50-offline, model: resnet50, scenario: Offline, batch: 64, precision: fp16}
  - {name: bert-offline, model: bert, scenario: Offline, batch: 8, precision: fp16}
repeats: 3
baseline: {scenario: bm6}
```

Derived values: `pciPassthru.64bitMMIOSizeGB` is, unless `vm_settings.mmio_size_gb` is
given, NVIDIA's per-GPU size for passthrough GPUs (A100 80GB: 256) and, for a vGPU, the
next power of two at or above twice its framebuffer, at least 64 (1g.10gb: 64, 4g.40gb:
128, 7g.80gb: 256), summed over the VM's GPUs.

## Fields
"""

INVENTORY_INTRO = """# Inventory reference

An inventory says where scenarios run: a vCenter and its ESXi hosts with their GPUs, the
addresses VMs get, how to reach guests over SSH, and bare-metal hosts for baselines.
Secrets are never inline: `password: {env: VAR}` or `password: {file: path}` (a file
readable by group or others is refused). vCenter is trusted by `ca_bundle` or by a pinned
certificate (`thumbprint`, written by `vgpu inventory trust`); see
[security.md](security.md). `vgpu schema inventory` prints the JSON
Schema. Examples: `inventory/local.yaml` (this machine), `inventory/sim.yaml` (the
simulated lab of `vgpu sim up`), `inventory/lab.example.yaml` (an annotated real lab).

## Fields
"""


def pages() -> dict[Path, str]:
    return {
        DOCS / "scenarios.md": SCENARIO_INTRO + "\n" + model_reference(
            Scenario, [InferenceWorkload, TrainingWorkload]),
        DOCS / "inventory.md": INVENTORY_INTRO + "\n" + model_reference(Inventory),
        DOCS / "mig.md": mig_reference(),
    }


def main(argv: list[str]) -> int:
    stale = []
    for path, text in pages().items():
        text = text.rstrip() + "\n"
        if "--check" in argv:
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                stale.append(path)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
    for path in stale:
        print(f"{path} is out of date: run python -m vgpu.docgen", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
