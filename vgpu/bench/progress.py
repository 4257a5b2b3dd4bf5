"""A bench on the terminal (rich): live progress, one line per instance with its state,
elapsed and remaining time of the timed run; and a command's listener, which also prints
what the job says (which baseline runs first) and the baseline's results."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console
from rich.progress import (
    BarColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from vgpu.bench.outcome import BenchOutcome
from vgpu.bench.summary import render


class RichListener:
    def __init__(self, console: Console) -> None:
        self.console = console
        self._progress: Progress | None = None
        self._tasks: dict[str, TaskID] = {}
        self._states: dict[str, str] = {}
        self._expected_s = 0.0

    def phase(self, text: str) -> None:
        self.console.print(f"[bold]{text}[/bold]")

    def begin_round(self, instances: Sequence[str], expected_s: float) -> None:
        if not self.console.is_terminal:
            return  # a live display only makes sense on a terminal; logs get the phases
        self._expected_s = max(expected_s, 0.1)
        self._progress = Progress(
            TextColumn("{task.description:<28}"),
            TextColumn("{task.fields[state]:<8}"),
            BarColumn(),
            TimeElapsedColumn(),
            TextColumn("left"),
            TimeRemainingColumn(),
            console=self.console,
            transient=True,
        )
        self._progress.start()
        self._tasks = {
            name: self._progress.add_task(name, total=self._expected_s, state="starting")
            for name in instances
        }

    def state(self, instance: str, text: str) -> None:
        self._states[instance] = text
        if self._progress is not None and instance in self._tasks:
            self._progress.update(self._tasks[instance], state=text)

    def tick(self, elapsed_s: float) -> None:
        if self._progress is None:
            return
        for name, task in self._tasks.items():
            if self._states.get(name) == "running":
                self._progress.update(task, completed=min(elapsed_s, self._expected_s))

    def end_round(self) -> None:
        if self._progress is not None:
            self._progress.stop()
        self._progress = None
        self._tasks = {}


class CommandListener(RichListener):
    """A command's listener: progress on standard error, the job's own lines and the
    baseline's results on ``out`` (``quiet``: the baseline's tables left out, as under
    --json)."""

    def __init__(self, out: Console, quiet: bool = False,
                 progress: Console | None = None) -> None:
        super().__init__(progress or Console(stderr=True))
        self.out = out
        self.quiet = quiet

    def note(self, text: str) -> None:
        self.out.print(text)

    def baseline_ran(self, outcome: BenchOutcome, db: str) -> None:
        if not self.quiet:
            render(outcome, self.out, db, None)
