"""One synchronised round of harness instances: ship each its spec, start them all, wait
until every one has loaded and warmed up (``VGPU-HARNESS READY``), send every one the same
``GO <t>``, wait for the timed runs to end and bring back result.json and the LoadGen logs.

If an instance dies before the start, the others are stopped at once: a round measures the
scenario's instances together or not at all. One that dies during the timed run fails the
round; the others run to their end and their records are kept beside its failure."""

from __future__ import annotations

import contextlib
import json
import shlex
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from loadgen.contract import EMPTY_RESULT, ResultRecordError, RunResult, parse_run_result
from vgpu.errors import RemoteError
from vgpu.remote.transport import RemoteProcess
from vgpu.targets.target import Target

READY_LINE = "VGPU-HARNESS READY"
RESULT_FILE = "result.json"
LOG_FILES = ("mlperf_log_summary.txt", "mlperf_log_detail.txt", "mlperf_log_accuracy.json")
POLL_S = 0.1


class RoundListener(Protocol):
    def state(self, instance: str, text: str) -> None: ...

    def tick(self, elapsed_s: float) -> None: ...


class SilentListener:
    def state(self, instance: str, text: str) -> None:
        return None

    def tick(self, elapsed_s: float) -> None:
        return None


@dataclass
class InstanceOutcome:
    """``record`` is result.json as the harness wrote it (None when it wrote none), kept
    for the store; ``result`` the same parsed once, as it arrived."""

    target: Target
    log_dir: Path
    exit_code: int | None = None
    record: dict[str, Any] | None = None
    problem: str | None = None  # why this instance failed, if it did
    result: RunResult = field(default=EMPTY_RESULT, init=False)

    def __post_init__(self) -> None:
        if self.record is not None:
            self.result = parse_run_result(self.record)

    def receive(self, record: dict[str, Any]) -> None:
        """Takes the record that came back; one that does not parse is this instance's
        problem, named by its field."""
        try:
            self.result = parse_run_result(record)
        except ResultRecordError as exc:
            self.problem = f"result.json does not match the harness's record: {exc}"
            return
        self.record = record


@dataclass
class RoundResult:
    outcomes: list[InstanceOutcome]
    failure: str | None = None
    go_unix: float | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def skew_s(self) -> float | None:
        starts = [o.result.timed_start_unix for o in self.outcomes
                  if o.result.timed_start_unix is not None]
        return max(starts) - min(starts) if len(starts) == len(self.outcomes) else None


@dataclass(frozen=True)
class RoundTimeouts:
    ready_s: float = 900.0  # building a full-size model on first use takes a while
    # GO time = now + margin, so every instance has the line before that time comes:
    # a fixed part for the first write plus a share per instance (the writes are serial).
    margin_s: float = 0.3
    margin_per_instance_s: float = 0.01
    grace_s: float = 120.0  # beyond the expected duration before the round is abandoned


class _Running:
    def __init__(self, target: Target, process: RemoteProcess, outcome: InstanceOutcome,
                 remote_dir: str) -> None:
        self.target = target
        self.process = process
        self.outcome = outcome
        self.remote_dir = remote_dir
        self.ready = False
        self.exited = False
        self.stopped = False  # killed by the orchestrator because of another instance
        self.last_lines: list[str] = []

    def drain(self) -> None:
        """Read what the harness printed (an SSH channel must be read or it stalls)."""
        while not self.exited:
            try:
                line = self.process.read_line(0.0)
            except TimeoutError:
                return
            if line is None:
                self._finish()
                return
            if line.strip() == READY_LINE:
                self.ready = True
            else:
                self.last_lines = [*self.last_lines[-4:], line]

    def poll_exit(self) -> bool:
        if self.exited:
            return True
        try:
            self.outcome.exit_code = self.process.wait(0.0)
        except TimeoutError:
            return False
        self.exited = True
        return True

    def _finish(self) -> None:
        try:
            self.outcome.exit_code = self.process.wait(10.0)
        except TimeoutError:
            return
        self.exited = True


def _describe_exit(code: int | None) -> str:
    if code is None:
        return "did not exit"
    if code == -1:  # what an SSH channel reports when the remote process got a signal
        return "ended without an exit status (killed by a signal, or its session dropped)"
    if code < 0 or code in (137, 143):
        signal_number = -code if code < 0 else code - 128
        return f"was killed by signal {signal_number}"
    return f"exited with code {code}"


def _stage(target: Target, tag: str, spec: dict[str, Any], log_dir: Path) -> str:
    if target.is_local:
        remote_dir = str(log_dir.resolve())
    else:
        remote_dir = target.work_dir(tag)
        target.transport.run(f"mkdir -p {shlex.quote(remote_dir)}", check=True)
    target.transport.put(json.dumps(spec, indent=2), f"{remote_dir}/spec.json")
    return remote_dir


def _remove_leftovers(item: _Running, tag: str) -> None:
    """A container whose client was killed keeps running: remove it."""
    if item.outcome.exit_code == 0:
        return
    command = item.target.cleanup_command(item.remote_dir, tag)
    if command is not None:
        # A host that is gone runs nothing of ours any more either.
        with contextlib.suppress(RemoteError):
            item.target.transport.run(command, timeout=60)


def _collect(running: _Running) -> None:
    outcome, target = running.outcome, running.target
    outcome.log_dir.mkdir(parents=True, exist_ok=True)
    if not target.is_local:
        for name in (RESULT_FILE, *LOG_FILES):
            try:
                target.transport.get(f"{running.remote_dir}/{name}", outcome.log_dir / name)
            except (OSError, RemoteError):  # a missing file shows up as a missing record
                continue
    result_path = outcome.log_dir / RESULT_FILE
    if result_path.exists():
        try:
            outcome.receive(json.loads(result_path.read_text()))
        except json.JSONDecodeError as exc:
            outcome.problem = f"result.json is not valid JSON ({exc})"
    (outcome.log_dir / "harness-stderr.txt").write_text(running.process.stderr_text)


def _problem_of(running: _Running) -> str | None:
    outcome = running.outcome
    record = outcome.record
    if outcome.problem:
        return outcome.problem
    if record is not None and outcome.result.failed:
        return outcome.result.reason or "the harness reported a failed run"
    if outcome.exit_code not in (0, None):
        stderr = running.process.stderr_text.strip().splitlines()
        tail = f": {stderr[-1]}" if stderr else ""
        written = "" if record is not None else " and wrote no result.json"
        who = "harness container" if running.target.container else "harness"
        return f"{who} {_describe_exit(outcome.exit_code)}{written}{tail}"
    if record is None:
        return "the harness wrote no result.json"
    return None


def run_round(
    targets: Sequence[Target],
    specs: dict[str, dict[str, Any]],
    log_dirs: dict[str, Path],
    tag: str,
    expected_s: float,
    listener: RoundListener | None = None,
    timeouts: RoundTimeouts = RoundTimeouts(),
    clock: Callable[[], float] = time.time,
) -> RoundResult:
    """Run every target's spec in one synchronised round. Ctrl-C (KeyboardInterrupt)
    stops every instance and is re-raised."""
    listen = listener or SilentListener()
    running: list[_Running] = []
    result = RoundResult(outcomes=[])
    try:
        for target in targets:
            log_dir = log_dirs[target.instance]
            log_dir.mkdir(parents=True, exist_ok=True)
            outcome = InstanceOutcome(target=target, log_dir=log_dir)
            result.outcomes.append(outcome)
            remote_dir = _stage(target, tag, specs[target.instance], log_dir)
            command = target.command(f"{remote_dir}/spec.json", remote_dir, tag)
            process = target.transport.open_process(command)
            running.append(_Running(target, process, outcome, remote_dir))
            listen.state(target.instance, "loading")
        result.failure = _wait_ready(running, listen, timeouts.ready_s)
        if result.failure is None:
            go = clock() + timeouts.margin_s + timeouts.margin_per_instance_s * len(running)
            result.go_unix = go
            for item in running:
                item.process.write_line(f"GO {go:.6f}")
                listen.state(item.target.instance, "running")
            result.failure = _wait_done(running, listen, go, expected_s + timeouts.grace_s,
                                        clock)
    except KeyboardInterrupt:
        for item in running:
            item.process.kill(grace=2.0)
            item.process.close()
        raise
    finally:
        for item in running:
            if not item.exited:
                item.process.kill(grace=3.0)
                item.poll_exit()
            _remove_leftovers(item, tag)
    for item in running:
        _collect(item)
        item.outcome.problem = _problem_of(item)
        if item.stopped:
            item.outcome.problem = f"stopped by the orchestrator: {result.failure}"
        item.process.close()
        listen.state(item.target.instance, "failed" if item.outcome.problem else "done")
    own = [i.outcome for i in running if i.outcome.problem and not i.stopped]
    if own:
        result.failure = "; ".join(f"instance {o.target.instance}: {o.problem}" for o in own)
    return result


def _wait_ready(running: list[_Running], listen: RoundListener, limit_s: float) -> str | None:
    deadline = time.monotonic() + limit_s
    while True:
        for item in running:
            item.drain()
            if item.exited and not item.ready:
                return _stop_others(running, item, "before it was ready")
            if item.ready:
                listen.state(item.target.instance, "ready")
        if all(item.ready for item in running):
            return None
        if time.monotonic() > deadline:
            waiting = ", ".join(i.target.instance for i in running if not i.ready)
            return _stop_all(running, f"instances not ready after {limit_s:.0f} s: {waiting}")
        time.sleep(POLL_S)


def _wait_done(running: list[_Running], listen: RoundListener, go: float, limit_s: float,
               clock: Callable[[], float]) -> str | None:
    """Waits for every instance to end. One that fails during the timed run does not stop
    the others: they finish and are stored beside its failure (the run is then failed and
    kept out of the statistics), so a killed container costs one instance, not the
    round's records."""
    while True:
        for item in running:
            item.drain()
            if item.poll_exit() and item.outcome.exit_code != 0:
                listen.state(item.target.instance, "failed")
        if all(item.exited for item in running):
            return None
        elapsed = clock() - go
        listen.tick(max(0.0, elapsed))
        if elapsed > limit_s:
            return _stop_all(running, f"the run did not finish within {limit_s:.0f} s")
        time.sleep(POLL_S)


def _stop_others(running: list[_Running], culprit: _Running, when: str) -> str:
    for item in running:
        if item is not culprit and not item.exited:
            item.stopped = True
            item.process.kill(grace=3.0)
            item.poll_exit()
    code = _describe_exit(culprit.outcome.exit_code)
    return f"instance {culprit.target.instance}: harness {code} {when}"


def _stop_all(running: list[_Running], reason: str) -> str:
    for item in running:
        if not item.exited:
            item.stopped = True
            item.process.kill(grace=3.0)
            item.poll_exit()
    return reason
