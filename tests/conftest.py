"""Suite-wide plugins: the lab rule (a missing lab fails under CI, tests/labs/required.py)
and the Docker lab's fixtures, registered once for the whole session (a fixture imported
into several modules is one fixture per module, and a second lab would then wait on the
first one's lock)."""

pytest_plugins = ["tests.labs.required", "tests.labs.dockerlab"]
