"""Where a scenario's harness instances run, below the commands that run workloads
(``vgpu.bench``, ``vgpu.train``): the decision (``where``), the placements on an
inventory's hosts (``placements``), the connected targets (``connect``, ``local``) with
their devices, clocks and container runtime."""
