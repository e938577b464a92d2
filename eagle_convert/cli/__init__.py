"""The click shell: the only package that imports click or rich. The console script is `cli.app:main`."""
