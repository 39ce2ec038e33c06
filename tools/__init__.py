"""Development tools: the sample corpus, the benchmark and the synthetic log writer they share (not shipped)."""
