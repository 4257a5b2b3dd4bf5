"""The docker lab fixture for the container tests (tests/labs/dockerlab.py)."""

from tests.labs.dockerlab import docker_lab  # noqa: F401
