"""What the GPU acceptance suite concludes from what it finds, checked without a GPU:
onnxruntime without its CUDA provider on a GPU host fails unless --no-ort-gpu was said,
and verify-catalogue's refusal with MIG mode off is a reason, not a JSON parse error."""

from __future__ import annotations

import onnxruntime as ort

from tests.gpu.gpuhost import catalogue_outcome, missing_cuda_provider

# What `vgpu mig verify-catalogue` prints on stderr (vgpu.nvml.catalogue_check) when the
# driver lists no profiles because MIG mode is off; nothing goes to stdout.
MIG_OFF_STDERR = ("error: NVML lists no MIG profiles on GPU 0 (MIG mode off, pending off); "
                  "this driver lists profiles only with MIG mode on: run it again after "
                  "`vgpu mig apply --enable-mig`\n")


def test_the_cpu_build_on_a_gpu_host_is_a_failure() -> None:
    providers = ort.get_available_providers()
    action, reason = missing_cuda_provider(ort.__version__, providers, no_ort_gpu=False) \
        or ("none", "")
    assert action == "fail"
    assert f"onnxruntime {ort.__version__} has no CUDAExecutionProvider" in reason
    assert "--no-ort-gpu" in reason and "install onnxruntime-gpu" in reason


def test_no_ort_gpu_makes_it_an_optional_skip() -> None:
    outcome = missing_cuda_provider(ort.__version__, ort.get_available_providers(), True)
    assert outcome is not None and outcome[0] == "skip"
    assert outcome[1].startswith("gpu: optional: ")
    assert missing_cuda_provider(None, [], True) == (
        "skip", "gpu: optional: onnxruntime is not installed; ONNX Runtime's GPU path left "
                "untested (--no-ort-gpu)")


def test_a_cuda_provider_is_what_the_suite_wants() -> None:
    assert missing_cuda_provider("1.31.0", ["CUDAExecutionProvider", "CPUExecutionProvider"],
                                 False) is None


def test_mig_off_with_no_profiles_is_an_optional_skip() -> None:
    action, reason = catalogue_outcome(3, "", MIG_OFF_STDERR)
    assert action == "skip"
    assert reason.startswith("gpu: optional: error: NVML lists no MIG profiles on GPU 0")


def test_a_report_is_read_and_a_silent_failure_is_named() -> None:
    assert catalogue_outcome(1, '{"differences": [1]}', "") == ("report", {"differences": [1]})
    action, reason = catalogue_outcome(1, "", "Traceback ...\nKeyError: 'x'\n")
    assert action == "fail" and reason.startswith("verify-catalogue exited 1 without a report")
    assert catalogue_outcome(2, "", "GPU 0 (X) is not in vgpu's MIG catalogue")[0] == "skip"
