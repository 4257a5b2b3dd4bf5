"""The root ``vgpu`` Typer app and the error console: what every CLI module registers its
commands on, kept apart from ``vgpu.cli`` (which imports those modules) so that no import
goes in a circle. ``vgpu --help`` lists the commands in the order the work goes."""

from __future__ import annotations

import typer
from rich.console import Console
from typer.core import TyperGroup

# Help panels in flow order, each with its commands in flow order. A command may name its
# own panel (rich_help_panel=...); one named nowhere goes to OTHER_PANEL, listed last.
FLOW_PANELS: dict[str, tuple[str, ...]] = {
    "Lab": ("sim", "inventory", "preflight", "drain", "undrain", "audit"),
    "Build": ("scenarios", "plan", "apply", "provision", "destroy"),
    "Measure": ("bench", "train", "revalidate", "campaign"),
    "Results": ("results", "compare", "compare-capacity", "report", "baseline"),
    "Devices": ("mig",),
}
OTHER_PANEL = "More"
_PANEL_OF = {name: panel for panel, names in FLOW_PANELS.items() for name in names}
_PANEL_ORDER = [*FLOW_PANELS, OTHER_PANEL]


def _flow_position(panel: str, name: str) -> tuple[int, int]:
    panel_rank = _PANEL_ORDER.index(panel) if panel in _PANEL_ORDER else len(_PANEL_ORDER)
    names = FLOW_PANELS.get(panel, ())
    return panel_rank, names.index(name) if name in names else len(names)


class FlowGroup(TyperGroup):
    """The root group: every command in a help panel, panels and commands in flow order."""

    def list_commands(self, ctx: typer.Context) -> list[str]:
        names = super().list_commands(ctx)
        for name in names:
            command = self.commands[name]
            if not getattr(command, "rich_help_panel", None):
                command.rich_help_panel = _PANEL_OF.get(name, OTHER_PANEL)  # type: ignore[attr-defined]
        return sorted(names, key=lambda n: _flow_position(
            self.commands[n].rich_help_panel, n))  # type: ignore[attr-defined]


app = typer.Typer(
    name="vgpu",
    cls=FlowGroup,
    help="Declarative vGPU/MIG labs on vSphere, benchmarked with MLPerf LoadGen and "
    "judged against bare metal.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=True,
)
err_console = Console(stderr=True, soft_wrap=True)
