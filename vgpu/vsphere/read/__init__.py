"""Read what vCenter has now: hosts and VMs (facts), a first inventory (discover), and
which VMs are this lab's (ownership). Changes nothing."""
