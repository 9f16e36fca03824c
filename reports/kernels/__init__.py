"""The kernel tables of `tbd kernels` and the names in their cells."""
