"""Bytes only: safetensors headers, `.bin` ranges, hub access, streamed writing, verification, atomic output."""
