"""minimal: a NumPy/Numba reference implementation of the research that ties recurrent networks to attention.

Glossary used throughout (mamba-minimal style):
    B   batch size              T   sequence length (time)
    D   input / model features  H   hidden units of a recurrent cell
    N   state size              f   GRIL feature size, w its window width
Arrays are (B, T, ...) with time on axis 1 and features contiguous on the last axis.

A cell's run-time choices have one word each, in every cell and scan: ``mode`` ("parallel" / "sequential", the
paper's two forms), ``method`` (the scan algorithm), ``backend`` ("numpy" / "numba" / "cuda", what runs it) and
GRIL's ``kernel`` (fused / unfused). None means the default, decided once in ``minimal.conventions``; the table
of values and defaults is docs/conventions.md.
"""
__version__ = "0.1.0"
