"""Rich renderers for the CLI, one module per command; the library never imports these."""
