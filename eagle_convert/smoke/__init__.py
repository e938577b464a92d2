"""Acceptance measurement: prompt sets and context buckets, the smoke run (reference or vLLM engine), plots."""
