"""What to change: desired VMs against the facts give a checked change set (diff, specs,
reconcile), a scenario gives its plan and desired VMs (workflow, from_plan), and the host
settings a scenario needs (advanced options, GPU assignment policy, Xorg) are planned here;
their small apply steps sit beside their plans and run only from the commands."""
