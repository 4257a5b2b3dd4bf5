"""Preflight: can this vCenter run vGPU scenarios, and this scenario in particular (run);
the pure checks (checks); saved reports (saved) and the drift between two (drift)."""
