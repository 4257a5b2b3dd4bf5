"""Talk to vCenter: log in and find the inventory's objects, read properties, wait for
tasks, check privileges, record every change in the audit trail. Imports no other layer of
vgpu.vsphere."""
