"""vSphere with pyvmomi, in layers; each imports only those below it:

- ``connect``: login, object lookup, property reads, tasks, privileges, audit trail
- ``desired``: what vgpu wants and what it recorded (pure: no vCenter, no pyVmomi)
- ``read``: what vCenter has now (facts, discovery, ownership)
- ``plan``: desired against actual -> a checked change set; host settings a scenario needs
- ``preflight``: cluster and scenario checks, saved reports, drift
- ``apply``: execute a change set, power, the lab lease, a host's upgrade window
- ``commands`` (the bodies of ``vgpu preflight / apply / destroy``) and ``render`` (rich
  output) sit on top; the CLI (vgpu.cli.vsphere) turns their results into exits.
"""
