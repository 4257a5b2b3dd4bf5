"""Checks before a MIG layout is touched: the GPU exists and is the scenario's model, and
MIG mode is on, or is switched on only when the operator asked for it (a GPU reset)."""

from __future__ import annotations

from collections.abc import Callable

from vgpu import mig
from vgpu.errors import InputError, ParameterError
from vgpu.nvml.backend import GpuBackend
from vgpu.nvml.errors import GPU_INDEX, MIG_DISABLED, MIG_SWITCH, LayoutError
from vgpu.nvml.spec import LayoutSpec
from vgpu.nvml.state import LayoutState, StateStore
from vgpu.nvml.types import GpuInfo, GpuInstanceProfile

Log = Callable[[str], None]

RESET_HELP = ("Stop every process using the GPU (also nvidia-persistenced, nvidia-dcgm / "
              "dcgm-exporter and nvidia-fabricmanager where they run), then reset it: "
              "`sudo nvidia-smi --gpu-reset -i {gpu}` (or reboot the host)")


def quiet(_: str) -> None:
    return None


def find_gpu(backend: GpuBackend, gpu: int) -> GpuInfo:
    gpus = backend.gpus()
    for g in gpus:
        if g.index == gpu:
            return g
    raise ParameterError(GPU_INDEX, f"this machine has no GPU {gpu} ({len(gpus)} GPU(s): "
                         f"{', '.join(str(g.index) for g in gpus)})",
                         "pick a GPU index from `vgpu mig status`")


def check_gpus_present(backend: GpuBackend, specs: list[LayoutSpec], source: str,
                       gpu_flag_given: bool) -> None:
    """Every planned GPU exists here, checked before any layout is touched, so a plan that
    needs more GPUs than this machine has changes nothing. ``gpu_flag_given``: the caller
    chose the GPU indexes (they are wrong, not the scenario)."""
    have = [g.index for g in backend.gpus()]
    absent = [s.gpu for s in specs if s.gpu not in have]
    if not absent:
        return
    listed = ", ".join(str(i) for i in have) or "none"
    if gpu_flag_given:
        raise ParameterError(GPU_INDEX, f"this machine has no GPU "
                             f"{', '.join(map(str, absent))} ({len(have)} GPU(s): {listed})",
                             "pick GPU indexes from `vgpu mig status`")
    raise InputError.single(source, "vms", f"the layout needs {len(specs)} GPU(s) "
                            f"({', '.join(str(s.gpu) for s in specs)}); this machine has "
                            f"{len(have)} ({listed})",
                            fix="plan instances that fit this machine's GPUs, or run it on a "
                                "host with more GPUs (inventory bare_metal)")


def check_model(info: GpuInfo, spec: LayoutSpec, source: str) -> None:
    if info.model_key == spec.model:
        return
    seen = info.model_key or f"not in vgpu's catalogue (PCI device 0x{info.pci_device_id:04X})"
    raise InputError.single(source, "gpu", f"the scenario is for {spec.model}, but GPU "
                            f"{info.index} is {info.name}: {seen}",
                            fix="run on a host with that GPU, pick another GPU index, or use "
                                "a scenario for this GPU model")


def profile_by_name(profiles: list[GpuInstanceProfile], name: str, gpu: int
                     ) -> GpuInstanceProfile:
    for p in profiles:
        if p.name == name:
            return p
    raise LayoutError(f"the driver offers no MIG profile {name} on GPU {gpu} (it offers "
                      f"{', '.join(p.name for p in profiles)}); compare with "
                      "`vgpu mig verify-catalogue`")


def name_of(profiles: list[GpuInstanceProfile], model: mig.GpuModel, profile_id: int) -> str:
    for p in profiles:
        if p.id == profile_id:
            return p.name
    try:
        return model.by_nvml_id(profile_id).name
    except KeyError:
        return f"profile-id-{profile_id}"


def ensure_mig_enabled(backend: GpuBackend, gpu: int, *, enable: bool, dry_run: bool,
                       state: LayoutState, store: StateStore, log: Log) -> list[str]:
    """Returns the actions taken (or that would be); raises when the operator must act."""
    mode = backend.mig_mode(gpu)
    if mode.reset_pending:
        raise LayoutError(f"MIG mode on GPU {gpu} is {mode.describe()}: a GPU reset is "
                          f"pending. {RESET_HELP.format(gpu=gpu)}; then run this again")
    if mode.current:
        return []
    if not enable:
        raise ParameterError(
            MIG_SWITCH,
            f"MIG mode is disabled on GPU {gpu}; enabling it needs a GPU reset, which stops "
            "every process on the GPU, so vgpu never does it implicitly. Nothing was changed",
            "let vgpu enable it when the GPU is free (or enable it yourself: "
            f"`sudo nvidia-smi -i {gpu} -mig 1`)", reason=MIG_DISABLED, details={"gpu": gpu})
    busy = backend.running_processes(gpu)
    if busy:
        raise LayoutError(f"GPU {gpu} is busy (processes {', '.join(map(str, busy))}); "
                          "enabling MIG mode needs an idle GPU. Stop them and run this again")
    if dry_run:
        return [f"would enable MIG mode on GPU {gpu} (needs a GPU reset)"]
    log(f"WARNING: enabling MIG mode on GPU {gpu}: the GPU must be reset; every process "
        "on it stops and other users lose it until then")
    state.mig_enabled_by_vgpu = True
    store.save(state)
    mode = backend.set_mig_mode(gpu, True)
    if mode.reset_pending:
        raise LayoutError(f"MIG mode on GPU {gpu} is now {mode.describe()}. "
                          f"{RESET_HELP.format(gpu=gpu)}; then run the same `vgpu mig apply` "
                          "again (MIG mode is on then: it needs no enabling)")
    return [f"enabled MIG mode on GPU {gpu}"]
