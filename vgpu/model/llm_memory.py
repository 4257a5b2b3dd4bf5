"""Whether an LLM workload (model llm) fits the GPU memory each VM or bare-metal instance
gets: weights plus the KV cache of ``batch`` sequences at full context (input_tokens.max +
max_output_tokens), against the slice's framebuffer less what a serving engine keeps back.
A scenario that asks for more is refused when it is loaded; `vgpu plan` prints the sum."""

from __future__ import annotations

from loadgen.contract import (
    DEFAULT_VARIANT,
    GIB,
    LLM_MODEL,
    RESERVED_SHARE,
    LlmSpec,
    MemoryEstimate,
    estimate,
)
from vgpu import mig
from vgpu.model.scenario import InferenceWorkload, Scenario
from vgpu.model.vgpu_request import parse_vgpu


def workload_estimate(workload: InferenceWorkload) -> MemoryEstimate | None:
    llm = workload.llm_spec()
    if llm is None:
        return None
    variant = workload.variant or DEFAULT_VARIANT[LLM_MODEL]
    return estimate(variant, workload.precision, workload.batch, context_tokens(llm))


def context_tokens(llm: LlmSpec) -> int:
    return llm.input_tokens_max + llm.max_output_tokens


def usable_gib(framebuffer_gb: float) -> float:
    return framebuffer_gb * (1 - RESERVED_SHARE)


def vm_framebuffers(scenario: Scenario) -> list[tuple[int, str, str, int]]:
    """(vms index, VM group name, device label, GB) of the smallest device of each VM group
    that has one: every instance must hold the model on its own device."""
    gpu = scenario.gpu_model
    out = []
    for i, spec in enumerate(scenario.vms):
        try:
            requests = [parse_vgpu(text, gpu) for text in spec.vgpus]
        except mig.ProfileParseError:
            continue  # reported by the vGPU checks
        if requests:
            smallest = min(requests, key=lambda r: r.framebuffer_gb)
            out.append((i, spec.name, smallest.label, smallest.framebuffer_gb))
    return out


def refusal(workload: InferenceWorkload, est: MemoryEstimate, vm: str, device: str,
            framebuffer_gb: int) -> tuple[str, str]:
    """The message (with the arithmetic) and the fix for a workload that does not fit."""
    message = (f"workload '{workload.label}' (llm/{est.variant} {est.precision}, batch "
               f"{est.batch} x {est.context_tokens} tokens) needs {est.total_bytes / GIB:.1f} "
               f"GiB but VM '{vm}' gets {device} with {framebuffer_gb} GB, of which "
               f"{usable_gib(framebuffer_gb):.1f} GiB hold weights and KV cache "
               f"({1 - RESERVED_SHARE:.0%}): {est.arithmetic()}")
    smaller = "precision fp16 or a smaller variant" if est.precision == "fp32" \
        else "a smaller variant"
    fix = ("give the VM a larger slice, or lower batch, max_output_tokens or "
           f"input_tokens.max, or use {smaller}")
    return message, fix


def plan_lines(scenario: Scenario) -> list[str]:
    """`vgpu plan`'s memory-estimate line per LLM workload and device."""
    lines = []
    for workload in scenario.workloads:
        if not isinstance(workload, InferenceWorkload) or workload.model != LLM_MODEL:
            continue
        est = workload_estimate(workload)
        assert est is not None
        fits = [f"{device} {'fits' if est.fits(gb) else 'DOES NOT FIT'} ({gb} GB)"
                for _, _, device, gb in vm_framebuffers(scenario)]
        lines.append(f"memory estimate {workload.label}: {est.arithmetic()}"
                     + (f"; {', '.join(dict.fromkeys(fits))}" if fits else ""))
    return lines
