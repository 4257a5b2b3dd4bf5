"""The verdict engine: comparisons of stored series against their references (bare
metal, another scenario, a baseline, calibrated values), the referee that picks the
reference, sequential repeats and the checks of each kind of workload. Reads the store;
never formats for people."""
