"""What smoke, check, report and drift share: prompt sets, counters and results, the reference
engine, vLLM pass planning with the fewest engine starts, the controls and throughput."""
