"""The PyTorch profiler (Kineto) Chrome-trace reader: decoding, columns, the op tree, FLOP attribution."""
