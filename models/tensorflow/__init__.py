"""Suite workloads in TensorFlow 2 / Keras 3.

Imported only in the TensorFlow interpreter (.venv-tensorflow): they import tensorflow and keras,
never torch or mxnet.
"""
