"""Build the lab's simulator binary once per machine and cache it.

The binary is keyed by a hash of main.go, the Go version and the govmomi package version,
so an edit to the lab or a toolchain upgrade rebuilds it and anything else reuses it.
``python -m vgpu.sim.build`` builds it and prints its path (scripts/setup.sh calls this).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from vgpu.errors import RemoteError
from vgpu.runpaths import cache_dir

MAIN_GO = Path(__file__).parent / "vcsim" / "main.go"
GOPATH = Path("/usr/share/gocode")
GOVMOMI_SRC = GOPATH / "src" / "github.com" / "vmware" / "govmomi"
BUILD_HINT = (
    "install Go and govmomi's sources (Debian: apt-get install golang-go "
    "golang-github-vmware-govmomi-dev) or run scripts/setup.sh --test"
)


def _go() -> str:
    debian_go = Path("/usr/lib/go/bin/go")
    go = shutil.which("go") or (str(debian_go) if debian_go.exists() else None)
    if go is None:
        raise RemoteError(f"the Go compiler is not installed: {BUILD_HINT}")
    if not GOVMOMI_SRC.is_dir():
        raise RemoteError(f"govmomi sources not found at {GOVMOMI_SRC}: {BUILD_HINT}")
    return go


def _govmomi_version() -> str:
    marker = GOVMOMI_SRC / "go.mod"
    try:
        return str(marker.stat().st_mtime_ns)
    except OSError:
        return "unknown"


def binary_key(go: str) -> str:
    """A short hash of everything the binary depends on."""
    version = subprocess.run([go, "version"], capture_output=True, text=True, check=True).stdout
    digest = hashlib.sha256()
    digest.update(MAIN_GO.read_bytes())
    digest.update(version.encode())
    digest.update(_govmomi_version().encode())
    return digest.hexdigest()[:16]


def binary_path() -> Path:
    """The cached binary's path for the current sources (it may not exist yet)."""
    return cache_dir() / f"vcsim-{binary_key(_go())}"


def build(force: bool = False) -> Path:
    """Return the cached simulator binary, building it first when missing (about 20 s)."""
    go = _go()
    target = cache_dir() / f"vcsim-{binary_key(go)}"
    if target.exists() and not force:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    # Build beside the target and rename: parallel builders never see a half-written file.
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".build-") as tmp:
        out = Path(tmp) / "vcsim"
        env = {
            **os.environ,
            "GO111MODULE": "off",
            "GOPATH": str(GOPATH),
            "GOCACHE": str(cache_dir() / "go-build"),
            "GOFLAGS": "",
        }
        result = subprocess.run(
            [go, "build", "-o", str(out), str(MAIN_GO)],
            capture_output=True, text=True, env=env, cwd=MAIN_GO.parent,
        )
        if result.returncode != 0:
            raise RemoteError(f"building the vSphere simulator failed:\n{result.stderr.strip()}")
        os.replace(out, target)
    # Binaries of older sources are never used again (25 MB each).
    for stale in target.parent.glob("vcsim-*"):
        if stale != target and stale.is_file():
            stale.unlink(missing_ok=True)
    return target


def main() -> None:
    try:
        print(build(force="--force" in sys.argv[1:]))
    except RemoteError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(1) from None


if __name__ == "__main__":
    main()
