"""Freeing nvidia.ko before its driver is changed in place. NVIDIA's installer refuses while
the module is loaded, and it stays loaded while anything holds it open: containers given a
GPU, nvidia-gridd (vGPU licensing) and nvidia-persistenced. These are stopped, then the
modules are unloaded; the reboot after the install starts them again on the new driver."""

from __future__ import annotations

from vgpu.provision.step import HostContext, Step

# The GPU's holders that run as services; both are installed by the driver.
DRIVER_SERVICES = ("nvidia-gridd", "nvidia-persistenced")
# Dependents first: nvidia_uvm, nvidia_drm and nvidia_modeset hold nvidia itself.
NVIDIA_MODULES = ("nvidia_uvm", "nvidia_drm", "nvidia_modeset", "nvidia")
# Running containers that were given a GPU (docker has no filter for device requests).
STOP_GPU_CONTAINERS = (
    "if command -v docker >/dev/null 2>&1 && ids=$(docker ps -q 2>/dev/null) && "
    '[ -n "$ids" ]; then docker inspect -f '
    "'{{if .HostConfig.DeviceRequests}}{{.Id}}{{end}}' $ids | xargs -r docker stop; fi")


def release_driver(ctx: HostContext, step: Step) -> None:
    """Stop what holds nvidia.ko and unload it; fails the step, naming what to stop, when
    the module stays in use."""
    step.must(ctx, STOP_GPU_CONTAINERS, sudo=True,
              fix="stop the containers that use the GPU (`docker ps`), then re-run")
    for unit in DRIVER_SERVICES:
        step.must(ctx, f"if systemctl is-active --quiet {unit}; then systemctl stop {unit}; "
                  "fi", sudo=True, fix=f"stop {unit} by hand (`systemctl stop {unit}`)")
    unload = f"modprobe -r {' '.join(NVIDIA_MODULES)}"
    result = ctx.run(unload, sudo=True)
    if not result.ok:
        raise step.fail(ctx, f"nvidia.ko stays loaded after stopping GPU containers, "
                        f"{' and '.join(DRIVER_SERVICES)}: `{unload}` exited "
                        f"{result.exit_code}: {result.tail()}",
                        "stop whatever still uses the GPU (`sudo lsof /dev/nvidia*`), or "
                        "uninstall the old driver (`sudo nvidia-uninstall`) and reboot, then "
                        "re-run `vgpu provision`")
