"""What vgpu wants of vSphere and what it recorded, with no vCenter call and no pyVmomi:
a VM's desired shape and marks, shared limits, the GPU assignment policy, ATS settings,
driver compatibility, the local records of created VMs and drained hosts. Imports no
other layer of vgpu.vsphere."""
