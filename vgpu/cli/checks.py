"""Checks of command-line input that commands share or that are worth naming apart from
the command: each raises an InputError naming the flag and the fix, before anything runs."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, cast

from vgpu.errors import InputError

if TYPE_CHECKING:
    from vgpu.model.scenario import InferenceWorkload, Scenario
    from vgpu.targets.runtime import RuntimeOptions

_UNITS_S = {"s": 1.0, "m": 60.0, "h": 3600.0}


def budget_s(text: str | None) -> float | None:
    """``45m`` / ``2h`` / ``900s`` / ``900`` in seconds."""
    if text is None:
        return None
    unit = text[-1].lower() if text and text[-1].isalpha() else "s"
    number_part = text[:-1] if text and text[-1].isalpha() else text
    try:
        seconds = float(number_part) * _UNITS_S[unit]
    except (KeyError, ValueError):
        seconds = -1.0
    if seconds <= 0:
        raise InputError.single("command line", "--budget", f"not a duration: {text!r}",
                                fix="give e.g. 45m, 2h or 900s")
    return seconds


def check_positive(value: float | None, flag: str) -> None:
    if value is not None and value <= 0:
        raise InputError.single("command line", flag, f"must be > 0, got {value}",
                                fix=f"give {flag} a positive number")


def check_counts(runs: int | None, duration: float | None) -> None:
    if runs is not None and runs < 1:
        raise InputError.single("command line", "--runs", f"must be >= 1, got {runs}",
                                fix="give --runs 1 or more")
    check_positive(duration, "--duration")


def check_workloads(sc: Scenario, wanted: list[str] | None) -> None:
    known = [w.label for w in sc.workloads]
    for name in wanted or []:
        if name not in known:
            raise InputError.single(sc.source or "scenario", "--workload",
                                    f"no workload named '{name}'",
                                    fix=f"use one of: {', '.join(known)}")


def _cannot_be_slowed(w: InferenceWorkload) -> bool:
    """An LLM workload whose engine --inject-slowdown cannot slow: backend openai always (an
    endpoint, or vgpu's loopback server under that name), torch outside a capacity search
    (a capacity search of torch runs the loopback server of the ONNX Runtime engine, which
    is slowed). loadgen.llm.engines.refuse_slowdown refuses them again in the harness."""
    from loadgen.contract import TOKEN_SCENARIOS  # the harness's test for a search

    if w.model != "llm":
        return False
    searches = w.capacity is not None and w.scenario in TOKEN_SCENARIOS
    return w.backend == "openai" or (w.backend == "torch" and not searches)


def check_slowdown(sc: Scenario, wanted: list[str] | None, slowdown_pct: float | None) -> None:
    """--inject-slowdown on a chosen LLM workload whose engine cannot be slowed: refused
    before anything runs (a run labelled slowed would measure nothing it says), naming the
    workload's backend field."""
    from vgpu.model.scenario import InferenceWorkload

    if not slowdown_pct:
        return
    for index, w in enumerate(sc.workloads):
        if (isinstance(w, InferenceWorkload) and _cannot_be_slowed(w)
                and (not wanted or w.label in wanted)):
            raise InputError.single(
                sc.source or "scenario", f"workloads[{index}].backend",
                f"--inject-slowdown slows the onnxruntime engine of an LLM workload (and a "
                f"capacity search's loopback server), not backend {w.backend} ({w.label})",
                fix="leave --inject-slowdown out, or choose the other workloads with "
                    "--workload")


def check_triton(sc: Scenario, wanted: list[str] | None, url: str | None,
                  image: str | None) -> bool:
    """Whether a Triton server will be deployed (a chosen workload has backend triton and
    no --triton-url names a running one)."""
    from vgpu.model.scenario import InferenceWorkload

    if url is not None:
        host, _, port = url.rpartition(":")
        if "://" in url or not host or not port.isdigit():
            raise InputError.single("command line", "--triton-url", f"'{url}' is not "
                                    "HOST:PORT", fix="give the server's gRPC address, e.g. "
                                    "10.0.0.5:8001")
        if image is not None:
            raise InputError.single("command line", "--triton-image", "nothing is deployed "
                                    "with --triton-url", fix="give one of the two")
    chosen = [w for w in sc.workloads if isinstance(w, InferenceWorkload)
              and (not wanted or w.label in wanted)]
    return url is None and any(w.backend == "triton" for w in chosen)


def runtime_options(runtime: str | None, image: str | None, base_image: str,
                     docker_host: str | None, remote: bool,
                     triton_here: bool = False) -> RuntimeOptions:
    from vgpu.model.scenario import HarnessRuntime
    from vgpu.targets.runtime import RUNTIMES, RuntimeOptions

    if runtime is not None and runtime not in RUNTIMES:
        raise InputError.single("command line", "--runtime", f"'{runtime}' is not a runtime",
                                fix=f"use one of: {', '.join(RUNTIMES)}")
    given = [flag for flag, value in (("--image", image), ("--docker-host", docker_host))
             if value is not None]
    if given and remote:
        raise InputError.single("command line", "/".join(given),
                                "applies to containers on this machine only; on an "
                                "inventory's guests the image is the one `vgpu provision` "
                                "made and the daemon is the inventory's docker.host",
                                fix="leave it out, or set docker.host in the inventory")
    if triton_here:  # the Triton server container goes to --docker-host as well
        given = [flag for flag in given if flag != "--docker-host"]
    if given and runtime != "container":
        raise InputError.single("command line", "/".join(given),
                                "applies only to --runtime container",
                                fix="add --runtime container or leave it out")
    return RuntimeOptions(runtime=cast(HarnessRuntime | None, runtime), image=image,
                          base_image=base_image, docker_host=docker_host)


def check_export(export: str | None, export_dir: Path | None,
                  submitter: str | None) -> None:
    if export not in (None, "csv", "json", "mlperf"):
        raise InputError.single("command line", "--export", f"'{export}' is not a format",
                                fix="use --export csv, --export json or --export mlperf DIR")
    if export == "mlperf" and export_dir is None:
        raise InputError.single("command line", "--export mlperf", "needs the folder to "
                                "write", fix="give it after the format: --export mlperf DIR")
    if export != "mlperf" and export_dir is not None:
        raise InputError.single("command line", "DIR", f"'{export_dir}' is only taken by "
                                "--export mlperf", fix="leave it out or add --export mlperf")
    if export == "mlperf" and submitter is None:
        raise InputError.single("command line", "--submitter", "--export mlperf writes a "
                                "submission tree, which names its submitter",
                                fix="add --submitter ORG (your organization)")


def check_compare_inputs(reference: int | None, baseline: str | None,
                          references: Path | None, kind: str | None) -> None:
    given = [x for x in (reference, baseline, references) if x is not None]
    if len(given) != 1:
        raise InputError.single("command line", "REFERENCE / --baseline / --references",
                                f"{len(given)} references given",
                                fix="give exactly one of them")
    kinds = ("vm-vs-bare-metal", "scenario-vs-scenario", "run-vs-baseline")
    if kind is not None and kind not in kinds:
        raise InputError.single("command line", "--kind", f"'{kind}' is not a kind",
                                fix=f"use one of: {', '.join(kinds)}")


