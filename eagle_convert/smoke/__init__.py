"""Acceptance measurement: prompt sets and buckets, the smoke run, vLLM's acceptance formulas, plots."""
