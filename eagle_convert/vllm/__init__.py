"""Every use of vLLM's own (private) APIs: the strict load check and the spec-decode run, in a subprocess."""
