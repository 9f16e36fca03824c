"""The MXNet hook and the MXNet profiler dump reader. Only hook.py imports mxnet."""
