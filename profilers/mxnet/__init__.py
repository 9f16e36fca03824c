"""The MXNet hook, its recorders (memory, operand shapes) and the MXNet profiler dump reader.

The hook and its recorders import mxnet in the runner child; the trace and op readers never do,
so the parent reads an MXNet run without MXNet."""
