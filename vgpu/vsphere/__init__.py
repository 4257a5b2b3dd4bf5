"""vSphere with pyvmomi: log in, read hosts and VMs, plan and apply VM changes, preflight.

Modules, each with one job: ``connection`` (login, object lookup), ``facts`` (read state),
``desired`` (what a VM should be), ``diff`` (what to change, pure), ``specs`` (pyvmomi
specs), ``execute`` (run changes in parallel), ``reconcile`` (read + check + plan),
``tasks`` (wait for tasks, describe faults).
"""
