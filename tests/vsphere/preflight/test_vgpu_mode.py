"""ESXi 8.0 U3 reports each GPU's vGPU mode (HostGraphicsInfo.vgpuMode: none, sameSize,
mixedSize, multiInstanceGpu). Where it is there, preflight reads MIG mode from it instead of
inferring it from the offered types, and checks the planned GPUs against it. The simulator's
govmomi predates the field, so these use real pyvmomi data objects; the inference path is
covered against the simulator (apply/test_cli_e2e, plan/test_hgx_boards)."""

from __future__ import annotations

from pathlib import Path

from pyVmomi import vim

from vgpu import catalog, mig
from vgpu.model.load import load_inventory
from vgpu.planner import build_plan
from vgpu.vsphere.preflight.checks import mig_capable, vgpu_mode_checks
from vgpu.vsphere.read.facts import GpuDevice, HostFacts, vgpu_modes

ROOT = Path(__file__).resolve().parents[3]
PCI = ["0000:17:00.0", "0000:37:00.0", "0000:57:00.0", "0000:77:00.0"]
A100 = mig.gpu_model("A100-80GB")
MIG_TYPES = ["grid_a100d-1-10c", "grid_a100d-7-80c", "grid_a100d-20c"]


def graphics(pci: str, mode: str | None) -> vim.host.GraphicsInfo:
    return vim.host.GraphicsInfo(deviceName="GA100 [A100 PCIe 80GB]", vendorName="NVIDIA",
                                 pciId=pci, graphicsType="sharedDirect", vgpuMode=mode,
                                 memorySizeInKB=80 * 1024 * 1024)


def test_vgpu_mode_is_read_per_gpu_where_the_host_reports_it() -> None:
    info = [graphics(PCI[0], "multiInstanceGpu"), graphics(PCI[1], "mixedSize"),
            graphics(PCI[2], "none"), graphics(PCI[3], None)]
    assert vgpu_modes(info) == {PCI[0]: "multiInstanceGpu", PCI[1]: "mixedSize",
                                PCI[2]: "none"}
    assert vgpu_modes(None) == {}


def test_the_reported_mode_wins_over_the_offered_types() -> None:
    assert mig_capable(A100, [], "multiInstanceGpu") is True
    assert mig_capable(A100, MIG_TYPES, "mixedSize") is False
    assert mig_capable(A100, MIG_TYPES, "sameSize") is False
    # Without a reported mode: inferred from the MIG-backed types offered for the board.
    assert mig_capable(A100, MIG_TYPES, None) is True
    assert mig_capable(A100, ["grid_a100d-20c"], None) is False


def host(modes: list[str | None]) -> HostFacts:
    return HostFacts(
        name="DC0_C0_H0", connection_state="connected", in_maintenance=False,
        version="8.0.3", build="24022510", full_name="VMware ESXi 8.0.3",
        gpus=[GpuDevice(p, 0x10DE, 0x20B5, "GA100") for p in PCI], vgpu_types=MIG_TYPES,
        graphics_default_type="sharedDirect",
        vgpu_mode_per_gpu=vgpu_modes([graphics(p, m) for p, m in zip(PCI, modes,
                                                                     strict=True)]))


def test_preflight_checks_the_planned_mig_gpu_against_its_mode() -> None:
    inventory = load_inventory(ROOT / "inventory" / "sim.yaml")
    plan = build_plan(catalog.load("8"), inventory)  # seven 1g.10gb on GPU 0 of DC0_C0_H0
    assert {g.index for g in plan.gpus if g.mode == "mig" and g.host == "DC0_C0_H0"} == {0}

    [check] = vgpu_mode_checks(plan, {"DC0_C0_H0": host(["mixedSize", None, None, None])},
                               inventory)
    assert not check.ok
    assert check.detail == (
        "DC0_C0_H0 GPU 0 (0000:17:00.0) is planned mig but its vgpuMode is mixedSize: "
        "enable MIG on it (nvidia-smi -i <index> -mig 1 on DC0_C0_H0) and reboot")

    [check] = vgpu_mode_checks(plan, {"DC0_C0_H0": host(["multiInstanceGpu"] * 4)},
                               inventory)
    assert check.ok and check.detail.startswith("1 planned GPU(s)")
    # A host before 8.0 U3 reports no mode: nothing to check.
    assert vgpu_mode_checks(plan, {"DC0_C0_H0": host([None] * 4)}, inventory) == []
