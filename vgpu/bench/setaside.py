"""A disturbed block is replaced, not fatal: in an interleaved session, a block in which
another process disturbed a run (vgpu.results.store.disturbance, when disturbance is judged) is
set aside, both its runs kept in the store for their logs but out of the series, and the
block run again; after MAX_REPLACED_BLOCKS replacements a disturbed block stays, and the
verdict is INCONCLUSIVE naming it, so a transient busy period neither stops the session
nor decides it, and a machine that stays busy is said to be.

Setting a block aside must not choose which runs a side keeps. A disturbance seen on both
sides of the block (the machine was busy for both) is set aside outright. One seen on one
side only is not evidence enough: steal is seen only inside a VM, and a saturated GPU
throttles its clocks as part of its normal work, so the runs marked are the slow runs of
one side. Such a block is run again too, but its runs are stored as set aside for one
side (``ONE_SIDED_SET_ASIDE``): the verdict counts them per side, and a PASS must also
hold with an allowance for the candidate's disturbed share times their slowdown
(vgpu.results.verdict.allowance). Every metric the project records is measured inside each
side's own machine; none comes from outside the VM."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from vgpu.results.store.disturbance import Disturbance, disturbance
from vgpu.results.store.result_store import ResultStore
from vgpu.results.store.series import BOTH_SIDES_SET_ASIDE, ONE_SIDED_SET_ASIDE

# per workload of a session: a busier machine is a finding. 8 of a 40-block budget: a
# machine disturbed in 6% of its runs reaches it in under 1% of sessions; what the
# disturbed runs cost a PASS is the allowance's (vgpu.results.verdict.allowance)
MAX_REPLACED_BLOCKS = 8


@dataclass
class DisturbedBlocks:
    """The blocks a session set aside so far, against its limit."""

    limit: int = MAX_REPLACED_BLOCKS
    replaced: int = 0
    both_sides: int = 0  # blocks set aside for a disturbance on both sides
    one_side: dict[int, int] = field(default_factory=dict)  # per side (its index)

    def check(self, store: ResultStore, run_ids: Sequence[int]) -> list[Disturbance]:
        """What disturbed the runs of one block (none while disturbance is ignored)."""
        return [found for run_id in run_ids
                if (found := disturbance(run_id, store.metrics(run_id))) is not None]

    def set_aside(self, store: ResultStore, block: int, run_ids: Sequence[int],
                  found: Sequence[Disturbance], sides: Sequence[int] = (),
                  names: Sequence[str] = ()) -> str | None:
        """Sets the block's runs aside and says so, or None (nothing set aside) once the
        limit is reached: the disturbed block stays and judges the series INCONCLUSIVE.
        ``sides``: the side (0, 1) of each of ``run_ids``, ``names`` each side's name;
        without them every disturbance counts as seen on one side."""
        what = "; ".join(d.describe() for d in found)
        if self.replaced >= self.limit:
            return None
        self.replaced += 1
        disturbed_sides = {side for run_id, side in zip(run_ids, sides, strict=False)
                           if any(d.run_id == run_id for d in found)}
        both = len(disturbed_sides) == 2
        if both:
            self.both_sides += 1
        else:
            for side in disturbed_sides or {-1}:
                self.one_side[side] = self.one_side.get(side, 0) + 1
        prefix = BOTH_SIDES_SET_ASIDE if both else ONE_SIDED_SET_ASIDE
        reason = f"{prefix}{what}; block {block + 1} was run again"
        for run_id in run_ids:
            store.set_aside_run(run_id, reason)
        return (f"block {block + 1} set aside ({what}; runs "
                f"{', '.join(map(str, run_ids))}): run again, replacement {self.replaced} "
                f"of at most {self.limit}; {self.counts(names)}")

    def counts(self, names: Sequence[str] = ()) -> str:
        """``set aside so far: 1 for both sides; one side only: 2 disturbed on scenario 6,
        0 on scenario bm6 (a PASS must hold with an allowance for these)``."""
        label = dict(enumerate(names))
        per_side = ", ".join(f"{self.one_side.get(side, 0)} disturbed on {label[side]}"
                             for side in sorted(label)) or \
            f"{sum(self.one_side.values())} blocks"
        return (f"set aside so far: {self.both_sides} for both sides; one side only: "
                f"{per_side} (a PASS must hold with an allowance for these)")

    def exhausted(self, block: int, found: Sequence[Disturbance]) -> str:
        return (f"block {block + 1} disturbed after {self.limit} blocks set aside "
                f"({'; '.join(d.describe() for d in found)}): the session stops, its "
                "verdict INCONCLUSIVE")
