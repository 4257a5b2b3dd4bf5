"""The harness image on a container guest (step harness-image): built there from vgpu's
Dockerfile FROM the scenario's base image, or pulled from a registry and tagged, always
through the inventory's docker CLI. Done when the image carries this vgpu's harness version
(label vgpu.harness.version) and, for a build, the planned ONNX Runtime build, base and
guest driver branch. An image held fixed (a revalidation runs its baseline's image) is
only looked for, by its ID: it is never built or pulled over."""

from __future__ import annotations

import io
import json
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

from vgpu import stepnames
from vgpu.container import docker
from vgpu.container.images import (
    HeldImage,
    ImageBuild,
    harness_digest,
    write_build_context,
)
from vgpu.container.local import host_ca_bundle
from vgpu.container.spec import HARNESS_PYTHON
from vgpu.provision.requirements import GuestRequirements, HarnessImageSpec
from vgpu.provision.step import Check, HostContext, Step, StepFailed, guest_step
from vgpu.provision.steps.dockercmd import (
    CLASSIC_BUILDER,
    docker_fix,
    image_missing,
    last_json,
    output_tail,
    shell,
)
from vgpu.remote.transport import CommandResult, quote

VERSION_LABEL = "vgpu.harness.version"
ORT_PACKAGE_LABEL = "vgpu.harness.ort-package"
ORT_VERSION_LABEL = "vgpu.harness.ort-version"
BASE_LABEL = "vgpu.harness.base-image"
DRIVER_BRANCH_LABEL = "vgpu.harness.driver-branch"  # the guest driver branch it was made for
# what it was built from (vgpu.container.images.harness_digest): the same version built
# from other harness sources is another harness
CONTENT_LABEL = "vgpu.harness.content"
INSPECT_FORMAT = "{{.Id}} {{json .Config.Labels}}"
CONTEXT_ARCHIVE = "context.tar.gz"
BUILD_TIMEOUT_S = 3600.0
RUN_TIMEOUT_S = 600.0


@dataclass(frozen=True)
class ImageFacts:
    image_id: str
    labels: dict[str, str]

    def summary(self, tag: str) -> str:
        ort = " ".join(filter(None, (self.labels.get(ORT_PACKAGE_LABEL),
                                     self.labels.get(ORT_VERSION_LABEL))))
        return (f"{tag} {self.image_id}; harness {self.labels.get(VERSION_LABEL, '?')}"
                + (f"; {ort}" if ort else ""))


def inspect_argv(image: str, cli: docker.DockerCli) -> list[str]:
    return cli.argv("image", "inspect", "--format", INSPECT_FORMAT, image)


def parse_inspect(stdout: str) -> ImageFacts:
    """``docker image inspect --format INSPECT_FORMAT``: the ID, then the labels as JSON."""
    lines = [line for line in stdout.splitlines() if line.strip()]
    if not lines:
        raise ValueError("docker image inspect printed nothing")
    image_id, _, labels = lines[-1].strip().partition(" ")
    parsed = json.loads(labels) if labels else None
    return ImageFacts(image_id, {str(k): str(v) for k, v in (parsed or {}).items()})


def image_problems(facts: ImageFacts, spec: HarnessImageSpec) -> list[str]:
    """What differs from the wanted image; a pulled image is judged by its version only."""
    problems = []
    have = facts.labels.get(VERSION_LABEL)
    if have != spec.version:
        problems.append(f"image has harness {have or '(no label)'}; want {spec.version}")
    if spec.pull is None:
        package = facts.labels.get(ORT_PACKAGE_LABEL)
        if package != spec.ort_package:
            problems.append(f"image has {package or 'no ONNX Runtime label'}; want "
                            f"{spec.ort_package}")
        base = facts.labels.get(BASE_LABEL)
        if base != spec.base_image:
            problems.append(f"image built FROM {base or 'an unknown base'}; want "
                            f"{spec.base_image}")
        branch = facts.labels.get(DRIVER_BRANCH_LABEL)
        if spec.driver_branch is not None and branch != str(spec.driver_branch):
            problems.append(f"image made for guest driver branch {branch or '(no label)'}; "
                            f"want {spec.driver_branch}")
        content = facts.labels.get(CONTENT_LABEL)
        if content != harness_digest():
            problems.append(f"image built from other harness sources ({content or 'no label'}"
                            f"); want {harness_digest()}")
    return problems


def image_build(spec: HarnessImageSpec) -> ImageBuild:
    labels = {BASE_LABEL: spec.base_image, CONTENT_LABEL: harness_digest()}
    if spec.driver_branch is not None:
        labels[DRIVER_BRANCH_LABEL] = str(spec.driver_branch)
    return ImageBuild(tag=spec.tag, base_image=spec.base_image, ort_package=spec.ort_package,
                      network="host", labels=labels)


def _normalised(info: tarfile.TarInfo) -> tarfile.TarInfo:
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    info.mtime = 0
    return info


def context_tarball() -> bytes:
    """The build context (Dockerfile, pinned requirements, this machine's CA bundle for pip,
    loadgen/) as a tar.gz with the same bytes for the same files."""
    with tempfile.TemporaryDirectory(prefix="vgpu-context-") as folder:
        root = write_build_context(Path(folder) / "context", pip_ca_bundle=host_ca_bundle())
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
            tar.add(root, arcname=".", filter=_normalised)
        return buffer.getvalue()


def version_argv(tag: str, cli: docker.DockerCli) -> list[str]:
    return cli.argv("run", "--rm", "--network", "none", tag, HARNESS_PYTHON, "-m", "loadgen",
                    "--version")


def describe_version(info: dict[str, object]) -> str:
    """``loadgen --version`` JSON as 'onnxruntime-gpu 1.23.2 (CUDAExecutionProvider, ...)'."""
    ort = info.get("onnxruntime")
    if not isinstance(ort, dict):
        return "no ONNX Runtime"
    providers = ", ".join(str(p) for p in ort.get("providers") or []) or "no providers"
    return f"{ort.get('package') or 'onnxruntime'} {ort.get('version')} ({providers})"


@guest_step
class HarnessImageStep(Step):
    name = stepnames.HARNESS_IMAGE

    def __init__(self) -> None:
        self.unusable: CommandResult | None = None  # docker failed in the latest check
        self.found: ImageFacts | None = None  # the image the latest check accepted

    def preflight(self, req: GuestRequirements) -> list[tuple[str, str, str]]:
        if req.image is None:
            return [("guest.runtime", "no harness image settings were given",
                     "plan the scenario with guest.runtime: container")]
        if req.container_runtime != "docker":
            return [("guest.container_runtime",
                     f"the harness image is made with docker; this guest has "
                     f"{req.container_runtime}",
                     "set guest.container_runtime: docker, or guest.runtime: host")]
        return []

    def _spec(self, ctx: HostContext) -> HarnessImageSpec:
        spec = ctx.requirements.image
        if spec is None:
            raise self.fail(ctx, "no harness image settings were given",
                            "plan the scenario with guest.runtime: container")
        return spec

    def _facts(self, ctx: HostContext, image: str) -> ImageFacts | None:
        """The image's ID and labels; None where it is missing or docker is not usable
        (then ``self.unusable`` holds the answer)."""
        found = ctx.run(shell(inspect_argv(image, ctx.requirements.docker)), timeout=120)
        if found.ok:
            return parse_inspect(found.stdout)
        if not image_missing(found):
            self.unusable = found
        return None

    def check(self, ctx: HostContext) -> Check:
        spec = self._spec(ctx)
        self.unusable, self.found = None, None
        if spec.held is not None:
            return self._check_held(ctx, spec.held)
        wanted = spec.pull or spec.tag
        facts = self._facts(ctx, wanted)
        if facts is None:
            if self.unusable is not None:
                return Check(False, f"docker cannot be asked about {wanted}: "
                             f"{output_tail(self.unusable, 3)}")
            return Check(False, f"{wanted} is not on the guest")
        problems = image_problems(facts, spec)
        if spec.pull and not problems:
            tagged = self._facts(ctx, spec.tag)
            if tagged is None or tagged.image_id != facts.image_id:
                problems.append(f"{spec.tag} is not tagged from {spec.pull}")
        if problems:
            return Check(False, "; ".join(problems))
        self.found = facts
        return Check(True, facts.summary(spec.tag))

    def _check_held(self, ctx: HostContext, held: HeldImage) -> Check:
        facts = self._facts(ctx, held.image_id)
        if facts is None:
            if self.unusable is not None:
                return Check(False, f"docker cannot be asked about {held.image_id}: "
                             f"{output_tail(self.unusable, 3)}")
            return Check(False, f"the held harness image {held.reference} ({held.image_id}) "
                         "is not on the guest")
        self.found = facts
        return Check(True, f"{held.reference} {facts.image_id} held fixed; harness "
                     f"{facts.labels.get(VERSION_LABEL, '?')}")

    def apply(self, ctx: HostContext) -> None:
        spec = self._spec(ctx)
        if self.unusable is not None:
            raise self._docker_failed(ctx, "docker is not usable", self.unusable,
                                      "see the host log")
        if spec.held is not None:
            held = spec.held
            raise self.fail(
                ctx, f"the harness image held fixed, {held.reference} ({held.image_id}), is "
                "not on the guest, and a held image is never built or pulled over",
                "put that image back on the guest (`docker pull` it by digest from the "
                "registry it came from, or `docker save` it where it is and `docker load` "
                "it there), or build a new one, which changes the software benchmarked "
                "with the upgrade (revalidate --rebuild-image)")
        if spec.pull:
            self._pull(ctx, spec)
        else:
            self._build(ctx, spec)

    def _docker_failed(self, ctx: HostContext, what: str, result: CommandResult,
                       fix: str) -> StepFailed:
        cli = ctx.requirements.docker
        where = f" (docker -H {cli.host})" if cli.host else ""
        return self.fail(ctx, f"{what}{where}: exit {result.exit_code}: {output_tail(result)}",
                         docker_fix(result, fix))

    def _docker(self, ctx: HostContext, argv: list[str], what: str, fix: str,
                timeout: float = RUN_TIMEOUT_S, env: str = "") -> CommandResult:
        result = ctx.run(shell(argv, env), timeout=timeout)
        if not result.ok:
            raise self._docker_failed(ctx, what, result, fix)
        return result

    def _pull(self, ctx: HostContext, spec: HarnessImageSpec) -> None:
        assert spec.pull is not None
        cli = ctx.requirements.docker
        self._docker(ctx, cli.argv("pull", spec.pull), f"docker pull {spec.pull} failed",
                     "check the image name, that the guest reaches the registry, and "
                     "`docker login` on the guest for a private registry",
                     timeout=BUILD_TIMEOUT_S)
        self._docker(ctx, cli.argv("tag", spec.pull, spec.tag),
                     f"docker tag {spec.pull} {spec.tag} failed", "see the host log")

    def _build(self, ctx: HostContext, spec: HarnessImageSpec) -> None:
        made = self.must(ctx, "mktemp -d \"${TMPDIR:-/tmp}/vgpu-harness-build.XXXXXX\"",
                         fix="the guest needs a writable /tmp")
        folder = made.stdout.strip().splitlines()[-1]
        try:
            archive = f"{folder}/{CONTEXT_ARCHIVE}"
            ctx.transport.put(context_tarball(), archive, mode=0o600)
            self.must(ctx, f"mkdir {quote(folder)}/context && tar -xzf {quote(archive)} -C "
                      f"{quote(folder)}/context", fix="the guest needs tar and gzip")
            argv = docker.build_argv(image_build(spec), Path(folder) / "context",
                                     ctx.requirements.docker)
            self._docker(ctx, argv, f"building {spec.tag} FROM {spec.base_image} failed",
                         f"check that the guest can pull {spec.base_image} and reach the "
                         "package index (pip), or set guest.harness_image to a prebuilt image",
                         timeout=BUILD_TIMEOUT_S, env=CLASSIC_BUILDER)
        finally:
            ctx.run(f"rm -rf {quote(folder)}", timeout=120)

    def verify(self, ctx: HostContext) -> str:
        spec = self._spec(ctx)
        fix = ("push an image built by this vgpu version, or unset guest.harness_image to "
               "build on the guest") if spec.pull else "see the host log"
        checked = self.check(ctx)
        if not checked.done or self.found is None:
            raise self.fail(ctx, f"still not in the desired state after applying: "
                            f"{checked.detail}", fix)
        ran = self._docker(ctx, version_argv(spec.tag, ctx.requirements.docker),
                           f"`loadgen --version` in {spec.tag} failed",
                           "remove the image on the guest (`docker rmi`) and re-run")
        info = last_json(ran.stdout)
        if info is None or info.get("harness") != spec.version:
            have = info.get("harness") if info else f"no version JSON ({output_tail(ran, 3)})"
            raise self.fail(ctx, f"{spec.tag} runs harness {have}; want {spec.version}", fix)
        return (f"{spec.tag} {self.found.image_id}; harness {spec.version}; "
                f"{describe_version(info)}")
