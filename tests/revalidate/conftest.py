"""The real `vgpu` command runs here as in tests/bench: the same model cache fixture."""

from tests.bench.conftest import harness_cache

__all__ = ["harness_cache"]
