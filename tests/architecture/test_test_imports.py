"""No test module imports another test module: what several tests share lives in a helper
module of their folder (a name without the ``test_`` prefix), a conftest, or tests/labs/.
A test module that others import runs its own tests' imports in theirs, and moving or
renaming one test breaks the others."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def _is_test_module(name: str) -> bool:
    return name.startswith("tests.") and name.rsplit(".", 1)[-1].startswith("test_")


def imported_test_modules(source: str) -> set[str]:
    """The ``tests....test_x`` modules a module's source imports (also inside functions)."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if _is_test_module(alias.name)}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if _is_test_module(node.module):
                found.add(node.module)
            found |= {f"{node.module}.{alias.name}" for alias in node.names
                      if _is_test_module(f"{node.module}.{alias.name}")}
    return found


def test_no_test_module_imports_another() -> None:
    pairs = {(str(path.relative_to(TESTS.parent)), imported)
             for path in sorted(TESTS.rglob("*.py"))
             for imported in imported_test_modules(path.read_text(encoding="utf-8"))}
    assert pairs == set()


def test_the_scan_sees_each_form_of_import() -> None:
    source = ("import tests.a.test_x\nfrom tests.b.test_y import helper\n"
              "from tests.c import test_z\nfrom tests.labs.sshlab import SshLab\n"
              "def f():\n    from tests.d.conftest import QUIET\n")
    assert imported_test_modules(source) == {"tests.a.test_x", "tests.b.test_y",
                                             "tests.c.test_z"}
