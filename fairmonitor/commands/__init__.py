"""Subcommands of the ``fairmonitor`` CLI: each module has ``add_arguments`` and ``run``."""
