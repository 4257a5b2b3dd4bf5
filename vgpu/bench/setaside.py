"""A disturbed block is replaced, not fatal: in an interleaved session, a block in which
another process disturbed a run (vgpu.results.disturbance, when disturbance is judged) is
set aside, both its runs kept in the store for their logs but out of the series, and the
block run again; after MAX_REPLACED_BLOCKS replacements a disturbed block stays, and the
verdict is INCONCLUSIVE naming it, so a transient busy period neither stops the session
nor decides it, and a machine that stays busy is said to be."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from vgpu.results.disturbance import Disturbance, disturbance
from vgpu.results.store import ResultStore

MAX_REPLACED_BLOCKS = 3  # per workload of a session: a busier machine is a finding


@dataclass
class DisturbedBlocks:
    """The blocks a session set aside so far, against its limit."""

    limit: int = MAX_REPLACED_BLOCKS
    replaced: int = 0

    def check(self, store: ResultStore, run_ids: Sequence[int]) -> list[Disturbance]:
        """What disturbed the runs of one block (none while disturbance is ignored)."""
        return [found for run_id in run_ids
                if (found := disturbance(run_id, store.metrics(run_id))) is not None]

    def set_aside(self, store: ResultStore, block: int, run_ids: Sequence[int],
                  found: Sequence[Disturbance]) -> str | None:
        """Sets the block's runs aside and says so, or None (nothing set aside) once the
        limit is reached: the disturbed block stays and judges the series INCONCLUSIVE."""
        what = "; ".join(d.describe() for d in found)
        if self.replaced >= self.limit:
            return None
        self.replaced += 1
        reason = f"set aside: {what}; block {block + 1} was run again"
        for run_id in run_ids:
            store.set_aside_run(run_id, reason)
        return (f"block {block + 1} set aside ({what}; runs "
                f"{', '.join(map(str, run_ids))}): run again, replacement {self.replaced} "
                f"of at most {self.limit}")

    def exhausted(self, block: int, found: Sequence[Disturbance]) -> str:
        return (f"block {block + 1} disturbed after {self.limit} blocks set aside "
                f"({'; '.join(d.describe() for d in found)}): the session stops, its "
                "verdict INCONCLUSIVE")
