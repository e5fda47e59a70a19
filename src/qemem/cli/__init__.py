"""The ``qemem`` command line: a thin typer adapter over the library API."""

from qemem.cli.app import app, main

__all__ = ["app", "main"]
