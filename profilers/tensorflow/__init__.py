"""The TensorFlow hook and the TensorFlow trace reader. Only hook.py imports tensorflow."""
