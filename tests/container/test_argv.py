"""The container command builders: argv values only, no container runtime needed."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from vgpu.container import (
    HARNESS_PYTHON,
    ContainerSpec,
    DockerCli,
    ImageBuild,
    apptainer,
    container_name,
    default_tag,
    describe_exit,
    docker,
    harness_run_command,
    in_container,
    killed_by,
    write_build_context,
)

WORK = Path("/srv/runs/r1/vm1-0")
MIG = "MIG-5c89852c-d268-c3f3-1b07-005d5ae1dc3f"
HOST = "unix:///tmp/vd/docker.sock"


def spec(**overrides: object) -> ContainerSpec:
    values: dict[str, object] = {
        "image": "vgpu-harness:1.0.0", "run_id": "r1", "instance": "vm1-0", "work_dir": WORK,
        "command": harness_run_command("spec.json", "out")}
    values.update(overrides)
    return ContainerSpec(**values)  # type: ignore[arg-type]


def test_run_argv_for_a_mig_slice() -> None:
    argv = docker.run_argv(spec(devices=(MIG,), cpus=4), DockerCli(host=HOST))
    assert argv == [
        "docker", "-H", HOST, "run", "--rm", "--name", "vgpu-r1-vm1-0", "-i", "--init",
        "--label", "vgpu.run=r1", "--label", "vgpu.instance=vm1-0",
        "--gpus", f'"device={MIG}"', "--ipc=host", "--network=host", "--ulimit", "memlock=-1",
        "--cpus", "4", "-v", f"{WORK}:/work", "-w", "/work", "vgpu-harness:1.0.0",
        HARNESS_PYTHON, "-m", "loadgen", "run", "/work/spec.json", "--out", "/work/out",
        "--sync", "stdin"]


def test_run_argv_without_gpu_has_no_gpus_flag() -> None:
    argv = docker.run_argv(spec())
    assert argv[0] == "docker" and "-H" not in argv
    assert "--gpus" not in argv and "--cpus" not in argv


def test_run_argv_options() -> None:
    argv = docker.run_argv(spec(devices=("GPU-a", "GPU-b"), cpus=0.5, interactive=False,
                                init=False, ipc_host=False, network=None, user="1000:1000",
                                memlock_unlimited=False, env={"OMP_NUM_THREADS": "2"},
                                extra_labels={"vgpu.scenario": "s1"}))
    assert argv[argv.index("--gpus") + 1] == '"device=GPU-a,GPU-b"'
    assert argv[argv.index("--cpus") + 1] == "0.5"
    assert argv[argv.index("--user") + 1] == "1000:1000"
    # Run as a user the image does not know, the harness gets /work as its HOME.
    assert [argv[i + 1] for i, a in enumerate(argv) if a == "-e"] == [
        "HOME=/work", "OMP_NUM_THREADS=2"]
    for flag in ("-i", "--init", "--ipc=host", "--network=host", "memlock=-1"):
        assert flag not in argv
    labels = [argv[i + 1] for i, a in enumerate(argv) if a == "--label"]
    assert labels == ["vgpu.scenario=s1", "vgpu.run=r1", "vgpu.instance=vm1-0"]


def test_run_spec_cannot_override_the_run_labels() -> None:
    labels = spec(extra_labels={"vgpu.run": "other"}).labels
    assert labels["vgpu.run"] == "r1"


def test_names_are_docker_safe_and_unique() -> None:
    assert container_name("r1", "vm1-0") == "vgpu-r1-vm1-0"
    assert container_name("r1", "a") != container_name("r1", "b")
    odd = container_name("2024-01-01T10:00", "vm1/gpu0")
    assert re.fullmatch(r"vgpu-2024-01-01T10-00-vm1-gpu0-[0-9a-f]{8}", odd)
    assert spec(instance="vm1/0").name != spec(instance="vm1-0").name
    assert container_name("r1", "vm1/0") == container_name("r1", "vm1/0")


@pytest.mark.parametrize("overrides", [
    {"run_id": ""}, {"instance": ""}, {"devices": ("GPU-a,GPU-b",)}, {"devices": ("",)},
    {"devices": ('GPU"x',)}, {"cpus": 0}, {"command": ()}, {"env": {"BAD-NAME": "1"}},
])
def test_bad_specs_are_refused(overrides: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        spec(**overrides)


def test_harness_command_paths_stay_in_the_work_dir() -> None:
    assert harness_run_command("a/spec.json", "a/out", sync=None) == (
        "run", "/work/a/spec.json", "--out", "/work/a/out")
    assert in_container("x/y") == "/work/x/y"
    for bad in ("/etc/passwd", "../x", "a/../../b"):
        with pytest.raises(ValueError):
            in_container(bad)


def test_build_argv(tmp_path: Path) -> None:
    build = ImageBuild(tag="h:1", base_image="vgpu-test-base:bookworm",
                       ort_package="onnxruntime", ort_version="1.23.2", network="host",
                       pull=True, no_cache=True, labels={"vgpu.lab": "test"})
    argv = docker.build_argv(build, tmp_path, DockerCli(host=HOST))
    assert argv[:7] == ["docker", "-H", HOST, "build", "-t", "h:1", "-f"]
    assert argv[7] == str(tmp_path / "Dockerfile") and argv[-1] == str(tmp_path)
    build_args = [argv[i + 1] for i, a in enumerate(argv) if a == "--build-arg"]
    assert build_args == ["BASE_IMAGE=vgpu-test-base:bookworm", "ORT_PACKAGE=onnxruntime",
                          "HARNESS_VERSION=1.0.0", "ORT_VERSION=1.23.2"]
    assert argv[argv.index("--label") + 1] == "vgpu.lab=test"
    assert argv[argv.index("--network") + 1] == "host"
    assert "--pull" in argv and "--no-cache" in argv


def test_build_defaults_target_the_ngc_gpu_image(tmp_path: Path) -> None:
    build = ImageBuild()
    assert build.tag == default_tag() == "vgpu-harness:1.0.0"
    assert build.build_args() == {"BASE_IMAGE": "nvcr.io/nvidia/pytorch:24.10-py3",
                                  "ORT_PACKAGE": "onnxruntime-gpu", "HARNESS_VERSION": "1.0.0"}
    argv = docker.build_argv(build, tmp_path)
    assert "--network" not in argv and "--pull" not in argv
    with pytest.raises(ValueError):
        ImageBuild(ort_package="onnxruntime-rocm")


def test_inspect_ps_kill_rm_argv() -> None:
    cli = DockerCli(host=HOST)
    assert docker.image_id_argv("h:1") == ["docker", "image", "inspect", "--format",
                                           "{{.Id}}", "h:1"]
    assert docker.ps_argv("r1", cli=cli) == [
        "docker", "-H", HOST, "ps", "--no-trunc", "--filter", "label=vgpu.run=r1", "-a",
        "--format", "{{.Names}}"]
    assert docker.ps_argv("r1", "vm1-0", all_states=False, fmt="{{.ID}}") == [
        "docker", "ps", "--no-trunc", "--filter", "label=vgpu.run=r1", "--filter",
        "label=vgpu.instance=vm1-0", "--format", "{{.ID}}"]
    assert docker.kill_argv(["a", "b"]) == ["docker", "kill", "a", "b"]
    assert docker.kill_argv(["a"], signal="TERM") == ["docker", "kill", "--signal", "TERM", "a"]
    assert docker.rm_argv(["a", "b"], cli) == ["docker", "-H", HOST, "rm", "-f", "a", "b"]
    assert docker.version_argv() == ["docker", "version", "--format", "{{.Server.Version}}"]
    assert docker.output_lines(" a\n\nb \n") == ["a", "b"]
    assert DockerCli(binary="/usr/bin/docker").argv("ps") == ["/usr/bin/docker", "ps"]


def test_apptainer_exec_argv() -> None:
    argv = apptainer.exec_argv(spec(image="/opt/harness.sif", devices=(MIG,), cpus=2))
    assert argv == [
        "apptainer", "exec", "--cleanenv", "--no-home", "--nv", "--cpus", "2",
        "--env", "VGPU_RUN=r1", "--env", "VGPU_INSTANCE=vm1-0",
        "--env", f"CUDA_VISIBLE_DEVICES={MIG}", "--env", f"NVIDIA_VISIBLE_DEVICES={MIG}",
        "--bind", f"{WORK}:/work", "--pwd", "/work", "/opt/harness.sif",
        HARNESS_PYTHON, "-m", "loadgen", "run", "/work/spec.json", "--out", "/work/out",
        "--sync", "stdin"]


def test_apptainer_cpu_run_and_build() -> None:
    argv = apptainer.exec_argv(spec(image="h.sif", env={"OMP_NUM_THREADS": "1"}))
    assert "--nv" not in argv and "--cpus" not in argv
    assert not any(a.startswith("CUDA_VISIBLE_DEVICES") for a in argv)
    assert argv[argv.index("--env", argv.index("VGPU_INSTANCE=vm1-0")) + 1] == \
        "OMP_NUM_THREADS=1"
    assert apptainer.apptainer_build_argv(Path("/tmp/h.sif"), "vgpu-harness:1.0.0") == [
        "apptainer", "build", "--force", "/tmp/h.sif", "docker-daemon://vgpu-harness:1.0.0"]


@pytest.mark.parametrize(("code", "text", "signal"), [
    (0, "ok", None), (1, "the run failed", None), (2, "bad input", None),
    (125, "failed to start", None), (137, "killed by SIGKILL (docker kill", 9),
    (143, "killed by SIGTERM", 15), (-9, "killed by SIGKILL", 9), (3, "exit code 3", None),
])
def test_exit_codes(code: int, text: str, signal: int | None) -> None:
    assert text in describe_exit(code)
    assert killed_by(code) == signal


def test_build_context_carries_a_ca_bundle_for_pip(tmp_path: Path) -> None:
    bundle = tmp_path / "ca.pem"
    bundle.write_text("-----BEGIN CERTIFICATE-----\n")
    context = write_build_context(tmp_path / "ctx", pip_ca_bundle=bundle)
    assert (context / "pip-ca.pem").read_text() == bundle.read_text()
    build = ImageBuild(pip_index_url="https://mirror.lab/simple")
    assert build.build_args()["PIP_INDEX_URL"] == "https://mirror.lab/simple"


def test_build_context_holds_dockerfile_requirements_and_loadgen(tmp_path: Path) -> None:
    context = write_build_context(tmp_path / "ctx")
    names = sorted(p.name for p in context.iterdir())
    assert names == ["Dockerfile", "harness-requirements.txt", "loadgen", "pip-ca.pem"]
    assert (context / "pip-ca.pem").read_bytes() == b""
    assert (context / "loadgen" / "__main__.py").is_file()
    assert not list(context.rglob("__pycache__"))
    dockerfile = (context / "Dockerfile").read_text()
    assert "ARG BASE_IMAGE=nvcr.io/nvidia/pytorch:24.10-py3" in dockerfile
    assert "ARG ORT_PACKAGE=onnxruntime-gpu" in dockerfile
    assert HARNESS_PYTHON.removesuffix("/bin/python") in dockerfile
    lines = [line.strip() for line in
             (context / "harness-requirements.txt").read_text().splitlines()]
    pins = [line for line in lines if line and not line.startswith(("#", "--hash"))]
    assert pins and all("==" in line for line in pins)
    assert sum(line.startswith("--hash=sha256:") for line in lines) >= len(pins)
    assert "--require-hashes" in dockerfile


def test_run_argv_mounts_the_model_cache_and_points_the_harness_at_it() -> None:
    argv = docker.run_argv(spec(cache_dir=Path("/home/lab/.cache/vgpu-harness/models")))
    mounts = [argv[i + 1] for i, a in enumerate(argv) if a == "-v"]
    assert mounts[1] == "/home/lab/.cache/vgpu-harness/models:/cache"
    assert mounts[0].endswith(":/work")
    assert [argv[i + 1] for i, a in enumerate(argv) if a == "-e"] == ["VGPU_HARNESS_CACHE=/cache"]
