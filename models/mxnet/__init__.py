"""Suite workloads in MXNet Gluon (imported only in the MXNet interpreter: they import mxnet, never torch)."""
