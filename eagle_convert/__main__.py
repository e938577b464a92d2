"""`python -m eagle_convert`: the same CLI as the `eagle-convert` console script."""

from eagle_convert.cli.app import main

if __name__ == "__main__":
    main()
