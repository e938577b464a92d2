"""The draft checkpoint as a model: open it, detect its producer layout, check its config, describe it."""
