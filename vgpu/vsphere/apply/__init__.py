"""Change vCenter: run a change set (execute), power VMs off gently (power), hold the lab's
lease (lease), drain and undrain a host for its upgrade (window)."""
