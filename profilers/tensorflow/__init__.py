"""The TensorFlow hook, its memory recorder and the TensorFlow trace reader.

The hook (and xspace.py, when TensorFlow is there to read its own output) import tensorflow in the
runner child; the trace and op readers never do, so the parent reads a TensorFlow run without it."""
