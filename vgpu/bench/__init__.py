"""`vgpu bench`: the node harness fanned out over a scenario's targets with a
synchronised start, repeated, stored and judged."""
