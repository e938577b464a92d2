"""Torch reference engine: an EAGLE-3 / 3.1 drafter with vLLM's exact math (`drafter`), the target
wrapper (`target`), a chain speculative decoding loop with vLLM's counters (`loop`), draft loading
(`data`) and a training-time-test (TTT) trainer (`train`).

Imports torch; the static parts of eagle_convert must not import this package. Import from the
module that defines a name (`eagle_convert.reference.loop.speculative_generate`).
"""
