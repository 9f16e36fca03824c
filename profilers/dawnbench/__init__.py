"""DAWNBench entry reader: one submission's JSON and per-epoch TSV, parsed as written, nothing scored."""
