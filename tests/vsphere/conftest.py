"""The simulator lab fixture for every vSphere test."""

from tests.labs.vcsim import vcsim_lab  # noqa: F401
