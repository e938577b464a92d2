"""EAGLE-3 to EAGLE-3.1: a pure plan, the config writer, and the streamed apply."""
