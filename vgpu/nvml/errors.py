"""Errors of the NVML layer. Both backends raise the same classes, so code above them (and
its tests on the simulator) handles a real GPU's refusals the same way."""

from __future__ import annotations

from vgpu.errors import RemoteError

# The parameters of MIG operations a ParameterError names (the command line names their
# flags), and the reasons a command words its own fix for.
GPU_INDEX = "GPU index"  # the local GPU(s) an operation is for
MIG_SWITCH = "MIG mode switch"  # whether vgpu may switch MIG mode on (a GPU reset)
PLAN_HOST = "plan host"  # which host of the plan this machine is
MIG_DISABLED = "MIG disabled"  # MIG mode is off and vgpu may not switch it on
TOO_FEW_GPUS = "too few GPUs"  # fewer GPU indexes given than the plan's GPUs

# NVML return codes (nvml.h, same values as pynvml's NVML_ERROR_*) that MIG work meets.
INVALID_ARGUMENT = 2
NOT_SUPPORTED = 3
NO_PERMISSION = 4
NOT_FOUND = 6
DRIVER_NOT_LOADED = 9
LIBRARY_NOT_FOUND = 12
RESET_REQUIRED = 16
IN_USE = 19
INSUFFICIENT_RESOURCES = 23
INVALID_STATE = 29

# The text nvmlErrorString() gives for each code.
NVML_ERROR_TEXT: dict[int, str] = {
    INVALID_ARGUMENT: "Invalid Argument",
    NOT_SUPPORTED: "Not Supported",
    NO_PERMISSION: "Insufficient Permissions",
    NOT_FOUND: "Not Found",
    DRIVER_NOT_LOADED: "Driver Not Loaded",
    LIBRARY_NOT_FOUND: "NVML Shared Library Not Found",
    RESET_REQUIRED: "GPU requires restart",
    IN_USE: "In use by another client",
    INSUFFICIENT_RESOURCES: "Insufficient Resources",
    INVALID_STATE: "Invalid State",
}


class MigError(RemoteError):
    """An NVML call refused: ``code`` is the NVML return code, ``operation`` what was tried."""

    def __init__(self, code: int, operation: str, detail: str = "") -> None:
        self.code = code
        self.operation = operation
        self.nvml_text = NVML_ERROR_TEXT.get(code, f"NVML error {code}")
        if not detail and code == NO_PERMISSION:
            detail = "MIG changes need root: run with sudo"
        self.detail = detail
        extra = f" ({detail})" if detail else ""
        super().__init__(f"{operation}: {self.nvml_text}{extra}")

    @property
    def in_use(self) -> bool:
        return self.code == IN_USE

    @property
    def insufficient_resources(self) -> bool:
        return self.code == INSUFFICIENT_RESOURCES


class NvmlUnavailable(RemoteError):
    """No usable NVIDIA driver / NVML on this machine (or it sees no GPU)."""


class LayoutError(RemoteError):
    """The GPU's state does not allow the layout (held instances, a pending reset, a busy
    GPU); the message says what the operator must do."""
