"""``python -m qemem``: the command line."""

from qemem.cli import main

main()
