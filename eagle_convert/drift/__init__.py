"""`drift`: attention drift of a draft as its chain deepens (sink share, fed-back RMS, acceptance by depth)."""
