"""minimal: a NumPy/Numba reference implementation of the research that ties recurrent networks to attention.

Glossary used throughout (mamba-minimal style):
    B   batch size              T   sequence length (time)
    D   input / model features  H   hidden units of a recurrent cell
    N   state size              f   GRIL feature size, w its window width
Arrays are (B, T, ...) with time on axis 1 and features contiguous on the last axis.
"""
__version__ = "0.1.0"
