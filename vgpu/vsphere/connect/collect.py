"""Read properties through a property collector, following vCenter's paging."""

from __future__ import annotations

from typing import Any

from pyVmomi import vmodl


def retrieve_all(collector: Any, spec: Any) -> list[tuple[Any, dict[str, Any]]]:
    """(object, {property path: value}) for every object ``spec`` selects; pages that
    vCenter holds back behind a token are fetched as well."""
    found: list[tuple[Any, dict[str, Any]]] = []
    result = collector.RetrievePropertiesEx([spec], vmodl.query.PropertyCollector.RetrieveOptions())
    while result is not None:
        for obj in result.objects:
            found.append((obj.obj, {p.name: p.val for p in obj.propSet or []}))
        if not result.token:
            break
        result = collector.ContinueRetrievePropertiesEx(result.token)
    return found
