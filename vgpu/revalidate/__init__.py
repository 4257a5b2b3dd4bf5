"""`vgpu revalidate`: the after-upgrade job. Preflight with drift against the last saved
facts, apply and provision (converge), bench with the bare-metal twin, judge against bare
metal and against the pre-upgrade baseline, one verdict per scenario and workload."""
