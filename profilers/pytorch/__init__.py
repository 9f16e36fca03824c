"""The PyTorch hook and its memory tracker. Only these modules import torch."""
