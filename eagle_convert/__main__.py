"""`python -m eagle_convert`: the same CLI as the `eagle-convert` console script (`cli.entry`, which
ends a Ctrl-C during start-up in one line instead of a traceback)."""

from eagle_convert.cli import main

if __name__ == "__main__":
    main()
