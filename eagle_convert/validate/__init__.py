"""Findings against vLLM's loader rules: static rule families, the deep scan, the report."""
