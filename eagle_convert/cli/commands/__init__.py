"""Click commands beyond `inspect`, one module per command, each exposing `register(group)`.

`cli/app.py` imports a module only when its command is invoked (or listed in `--help`).
"""
