"""`eagle-convert check`: the pre-deployment gate (policy, stages, CI outputs)."""
