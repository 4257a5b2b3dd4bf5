"""What an interleaved workload will spend, said before its first judged block and checked
at its end (pure). A block is one run of each side; the series is looked at after fixed
block counts (vgpu.results.verdict.sequential) and stops at the first look that decides, so the
plan gives the time to each look and the worst case: every look undecided, the cap of
blocks run and each set-aside block run again."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class TimePlan:
    label: str
    looks: tuple[int, ...]  # block totals at which the series is looked at
    block_s: float  # one run of each side, start-up included (measured in the warm-ups)
    run: str  # what one run is: "one 10 s run", "one capacity search per instance"
    replaceable: int  # set-aside blocks that may run again

    @property
    def worst_blocks(self) -> int:
        return (self.looks[-1] if self.looks else 0) + self.replaceable

    def seconds_to(self, blocks: int) -> float:
        return blocks * self.block_s

    @property
    def worst_s(self) -> float:
        return self.seconds_to(self.worst_blocks)

    def describe(self) -> str:
        to_looks = ", ".join(f"{n} ({_minutes(self.seconds_to(n))})" for n in self.looks)
        return (f"time plan: blocks of {self.run} a side, "
                f"{_minutes(self.block_s)} a block with start-up (measured in the warm-ups); "
                f"looks at {to_looks}; worst case {_minutes(self.worst_s)} "
                f"({self.looks[-1] if self.looks else 0} blocks undecided"
                f"{f' + {self.replaceable} set aside' if self.replaceable else ''})")

    def kept(self, blocks: int, spent_s: float) -> str:
        """What the series spent against the plan: within its worst case, or over it
        and by how much (a slower machine than the warm-ups showed, or more blocks)."""
        planned = self.seconds_to(blocks)
        verdict = ("within the plan" if spent_s <= self.worst_s * 1.1 else
                   f"OVER the plan's worst case by {_minutes(spent_s - self.worst_s)}")
        return (f"time: {blocks} blocks in {_minutes(spent_s)} (planned "
                f"{_minutes(planned)} for {blocks} blocks, worst case "
                f"{_minutes(self.worst_s)}): {verdict}")


def plan_blocks(label: str, looks: Sequence[int], warm_up_s: Sequence[float],
                run: str, replaceable: int) -> TimePlan:
    """The plan from the sides' warm-up rounds (one run each, timed end to end)."""
    return TimePlan(label, tuple(looks), float(sum(warm_up_s)), run, replaceable)


def job_outline(looks: Mapping[str, Sequence[int]], run_rule: str) -> str:
    """The job's plan before anything runs: its workloads, the block structure and each
    one's looks; each workload's minutes follow its warm-ups."""
    shown = "; ".join(f"{name} after {', '.join(map(str, at))} blocks"
                      for name, at in looks.items())
    return (f"time plan: {len(looks)} workload(s), each one warm-up run a side (an Offline "
            "one a probe round first), then blocks of one run a side, stopping at the first "
            f"look that decides: {shown}; {run_rule}; each workload's minutes follow from "
            "its warm-ups")


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min" if seconds >= 60 else f"{seconds:.0f} s"
