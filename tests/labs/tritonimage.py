"""The test Triton image in the docker lab: ``tests/labs/triton.Dockerfile`` (the
tritonserver binary of the nvidia-pytriton wheel, CPU only, python backend) built FROM the
lab's Debian base. Built once per machine: later sessions reuse docker's layer cache, so
a rebuild takes seconds.

    built = build_triton_image(lab)           # BuildResult(tag, image_id, seconds, log)

Tests use the ``triton_image`` session fixture (import it with ``docker_lab`` into a
conftest)."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.labs.dockerlab import BASE_TAG, BuildResult, DockerLab, HarnessLab
from vgpu.container.local import build_env, host_ca_bundle

TRITON_TAG = "vgpu-triton:test"
HERE = Path(__file__).resolve().parent
DOCKERFILE = HERE / "triton.Dockerfile"
ENTRYPOINT = HERE / "triton-entrypoint.sh"
BUILD_TIMEOUT_S = 1800.0


def _context(folder: Path) -> Path:
    shutil.copyfile(DOCKERFILE, folder / "Dockerfile")
    shutil.copy2(ENTRYPOINT, folder / ENTRYPOINT.name)
    ca = host_ca_bundle()
    (folder / "pip-ca.pem").write_bytes(ca.read_bytes() if ca else b"")
    return folder


def build_triton_image(lab: DockerLab, tag: str = TRITON_TAG) -> BuildResult:
    """Builds (or finds in the layer cache) the test Triton image on the lab's base."""
    lab.ensure_base_image()
    with tempfile.TemporaryDirectory(prefix="vgpu-triton-") as tmp:
        context = _context(Path(tmp))
        argv = lab.cli.argv("build", "-t", tag, "-f", str(context / "Dockerfile"),
                            "--network", "host", "--build-arg", f"BASE_IMAGE={BASE_TAG}",
                            str(context))
        started = time.monotonic()
        done = subprocess.run(argv, capture_output=True, text=True, check=False,
                              timeout=BUILD_TIMEOUT_S, env=build_env())
        seconds = time.monotonic() - started
    log = done.stdout + done.stderr
    if done.returncode != 0:
        raise RuntimeError(f"docker build of {tag} failed ({done.returncode}):\n{log[-4000:]}")
    image = lab.image_id(tag)
    assert image, f"{tag} is missing after docker build"
    return BuildResult(tag, image, seconds, log)


@pytest.fixture(scope="session")
def triton_image(docker_lab: HarnessLab) -> Iterator[BuildResult]:
    """The test Triton image, built in the session's docker lab."""
    yield build_triton_image(docker_lab.lab)
