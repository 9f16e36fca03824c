"""Figures (explicit matplotlib Figures): one module per result kind, the canvas they share, saving."""
