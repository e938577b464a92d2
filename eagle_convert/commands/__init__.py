"""Click commands beyond `inspect`, one module per command; each exposes `register(group)`."""

from __future__ import annotations

import importlib

import click

# Module names under eagle_convert.commands; a module that is absent is simply not offered yet.
COMMANDS = ("upgrade", "diff", "validate", "smoke", "finetune")


def register_all(group: click.Group) -> None:
    for name in COMMANDS:
        try:
            module = importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"{__name__}.{name}":
                raise
            continue
        module.register(group)
