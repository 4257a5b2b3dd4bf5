"""vSphere with pyvmomi: log in, read hosts and VMs, plan and apply VM changes, preflight.

Modules, each with one job:

- ``connection``: login (TLS verified by default), object lookup by inventory names
- ``facts``: read hosts and VMs, one property-collector call per kind
- ``desired``: what a VM should be (the layer's own input); ``diff``: what to change (pure)
- ``specs``: the pyvmomi clone / reconfigure / customization specs
- ``execute``: run a change set, VMs in parallel, one VM's failure isolated; ``tasks``:
  wait for tasks and describe faults
- ``reconcile``: read + check + plan; ``workflow``: joins the planner (vgpu.planner) with facts
- ``from_inventory`` / ``from_plan``: adapters from the inventory and the Plan
- ``preflight``: host and scenario checks; ``render``: rich output; ``commands``: the
  bodies of ``vgpu preflight / apply / destroy``
"""
