"""The container tests use the docker lab fixtures of tests/conftest.py."""
