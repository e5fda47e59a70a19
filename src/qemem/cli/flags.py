"""Help screens without a value placeholder for flags.

Typer's rich help shows a type column for every option, ``<bool>`` for a flag too, although a
flag takes no value (``--quiet``, not ``--quiet <bool>``); the commands and groups here leave
that column empty for flags, as Typer's plain help already does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer
from typer.core import TyperCommand, TyperGroup, TyperOption

if TYPE_CHECKING:  # Typer's own click (older Typer versions use click itself)
    from typer._click import Context, Parameter


def _without_flag_types(params: list[Parameter]) -> list[Parameter]:
    """``params`` with an empty metavar on every flag that has none of its own."""
    for param in params:
        if isinstance(param, TyperOption) and param.is_flag and param.metavar is None:
            param.metavar = ""
    return params


class FlagCommand(TyperCommand):
    """A command whose help shows no ``<bool>`` for its flags (``--help`` included)."""

    def get_params(self, ctx: Context) -> list[Parameter]:
        return _without_flag_types(super().get_params(ctx))


class FlagGroup(TyperGroup):
    """A command group whose help shows no ``<bool>`` for its flags (``--help`` included)."""

    def get_params(self, ctx: Context) -> list[Parameter]:
        return _without_flag_types(super().get_params(ctx))


def plain_flag_help(app: typer.Typer) -> None:
    """Give every command of ``app`` and of its sub-apps the flag-friendly help (call it after
    all commands are registered; groups get it from ``typer.Typer(cls=FlagGroup)``)."""
    for command in app.registered_commands:
        if command.cls in (None, TyperCommand):
            command.cls = FlagCommand
    for group in app.registered_groups:
        if group.typer_instance is not None:
            plain_flag_help(group.typer_instance)
