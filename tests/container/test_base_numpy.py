"""The harness image keeps the base image's numpy (NGC's, which its torch is built
against) instead of the lock's: the Dockerfile's keep-base-numpy step, run as written on
a base interpreter holding torch and numpy and a harness venv over it holding another
numpy, leaves the base's numpy imported and torch working with it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "vgpu/container/harness_image/Dockerfile"
OTHER_NUMPY = "numpy==1.26.4"

pytestmark = pytest.mark.slow


def keep_base_numpy_step() -> str:
    text = DOCKERFILE.read_text()
    found = re.search(r"# keep-base-numpy: begin\n(.*?)# keep-base-numpy: end", text, re.S)
    assert found, f"{DOCKERFILE} has no keep-base-numpy step"
    command = found.group(1).strip()
    assert command.startswith("RUN ")
    return command[4:].replace("\\\n", " ")  # as Docker joins continued lines


def _numpy_file(python: Path) -> str:
    return subprocess.run([str(python), "-c", "import numpy; print(numpy.__file__)"],
                          capture_output=True, text=True, check=True).stdout.strip()


def test_the_venv_uses_the_base_numpy(tmp_path: Path) -> None:
    built = subprocess.run([sys.executable, str(ROOT / "scripts/gpu-replica.py"),
                            str(tmp_path / "base"), "--from",
                            sysconfig.get_paths()["purelib"]],
                           capture_output=True, text=True, check=True)
    base_python = Path(built.stdout.strip())
    harness = tmp_path / "harness"
    subprocess.run([str(base_python), "-m", "venv", "--without-pip", str(harness)], check=True)
    site = subprocess.run([str(harness / "bin/python"), "-c",
                           "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    base_site = subprocess.run([str(base_python), "-c",
                                "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip()
    # The base's packages seen from the venv, as --system-site-packages does on NGC.
    (Path(site) / "base.pth").write_text(base_site + "\n")
    subprocess.run([str(harness / "bin/python"), "-m", "pip", "install", "--quiet",
                    "--no-deps", OTHER_NUMPY], check=True)
    assert _numpy_file(harness / "bin/python").startswith(site)

    env = {**os.environ, "PATH": f"{base_python.parent}:{os.environ['PATH']}"}
    env.pop("PYTHONPATH", None)
    step = keep_base_numpy_step().replace("/opt/harness", str(harness))
    done = subprocess.run(["sh", "-c", step], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert _numpy_file(harness / "bin/python").startswith(base_site)
    assert "of the base:" in done.stdout
