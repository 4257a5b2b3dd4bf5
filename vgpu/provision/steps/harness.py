"""The node harness (``loadgen`` package) in a venv on the guest, at exactly the
orchestrator's version: the package is copied as a tarball and its version recorded."""

from __future__ import annotations

import functools
import hashlib
import io
import tarfile
from pathlib import Path

import vgpu
from vgpu import stepnames
from vgpu.provision.requirements import HarnessSpec
from vgpu.provision.step import Check, HostContext, Step, guest_step
from vgpu.remote.transport import quote

HARNESS_DIR = ".vgpu/harness"
PACKAGE = "loadgen"


def _package_files(source_dir: Path) -> list[Path]:
    return sorted(p for p in source_dir.rglob("*")
                  if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc")


def harness_version(source_dir: Path) -> str:
    """vgpu's version plus a hash of the package files, so any change reinstalls."""
    digest = hashlib.sha256()
    for path in _package_files(source_dir):
        digest.update(path.relative_to(source_dir).as_posix().encode())
        digest.update(path.read_bytes())
    return f"{vgpu.__version__}+{digest.hexdigest()[:12]}"


@functools.lru_cache(maxsize=4)
def _tarball_of_version(source_dir: Path, version: str) -> bytes:
    """One tarball per harness version (a digest of its files) per process: every host of
    a run gets the same bytes, built once."""
    return package_tarball(source_dir)


def package_tarball(source_dir: Path) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for path in _package_files(source_dir):
            info = tar.gettarinfo(str(path), f"{PACKAGE}/{path.relative_to(source_dir)}")
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.mtime = 0  # identical bytes for identical files
            with path.open("rb") as handle:
                tar.addfile(info, handle)
    return buffer.getvalue()


def harness_paths(home: str) -> dict[str, str]:
    root = f"{home}/{HARNESS_DIR}"
    return {"root": root, "src": f"{root}/src", "venv": f"{root}/venv",
            "python": f"{root}/venv/bin/python", "version": f"{root}/VERSION"}


@guest_step
class HarnessStep(Step):
    name = stepnames.NODE_HARNESS

    def _spec(self, ctx: HostContext) -> HarnessSpec:
        spec = ctx.requirements.harness
        if spec is None:
            raise self.fail(ctx, "no harness package given", "run from a vgpu checkout")
        return spec

    def check(self, ctx: HostContext) -> Check:
        spec, paths = self._spec(ctx), harness_paths(ctx.home)
        have = ctx.run(f"cat {quote(paths['version'])} 2>/dev/null").stdout.strip()
        if have != spec.version:
            return Check(False, f"harness {have or 'absent'}; want {spec.version}")
        probe = ctx.run(f"{quote(paths['python'])} -c 'import {PACKAGE}'")
        if not probe.ok:
            return Check(False, f"harness venv cannot import {PACKAGE}: {probe.tail()}")
        return Check(True, f"harness {spec.version} in {paths['venv']}")

    def apply(self, ctx: HostContext) -> None:
        spec, paths = self._spec(ctx), harness_paths(ctx.home)
        root, src = quote(paths["root"]), quote(paths["src"])
        tarball = f"{paths['root']}/{PACKAGE}-{spec.version}.tar.gz"
        ctx.transport.put(_tarball_of_version(spec.source_dir, spec.version), tarball,
                          mode=0o644)
        # Unpack beside the old copy and swap, so a drop never leaves half a package.
        self.must(ctx, f"rm -rf {root}/src.new && mkdir -p {root}/src.new && tar -xzf "
                  f"{quote(tarball)} -C {root}/src.new && rm -rf {src} && mv {root}/src.new "
                  f"{src} && rm -f {quote(tarball)}")
        venv, python = quote(paths["venv"]), quote(paths["python"])
        pip = "" if spec.requirements else " --without-pip"
        purelib = self.must(
            ctx, f"{{ test -x {python} || {quote(spec.python)} -m venv{pip} {venv}; }} && "
            f"{python} -c 'import sysconfig; print(sysconfig.get_paths()[\"purelib\"])'",
            fix=f"install python3-venv on {ctx.name}").stdout.strip()
        if spec.requirements:
            args = " ".join(quote(a) for a in spec.pip_args)
            reqs = " ".join(quote(r) for r in spec.requirements)
            self.must(ctx, f"{venv}/bin/pip install -q {args} {reqs}", timeout=1800,
                      fix="check that the guest reaches the package index (or give pip_args "
                      "with a local wheel directory)")
        pth = "\n".join((paths["src"], *spec.extra_site_dirs)) + "\n"
        ctx.transport.put(pth, f"{purelib}/vgpu_harness.pth", mode=0o644)
        ctx.transport.put(spec.version + "\n", paths["version"], mode=0o644)
