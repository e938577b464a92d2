"""How vLLM reads a draft: one home for every vLLM rule, each citing vLLM's source."""
