"""The vSphere simulator lab: govmomi's vcsim shaped like a GPU lab (build, start, stop)."""
