"""Synthetic data drawn with numpy on the host, for the workloads of every framework other than PyTorch.

Shaped like the real data sets (docs/architecture.md); models/pytorch/ draws its own with torch.Generator.
"""
