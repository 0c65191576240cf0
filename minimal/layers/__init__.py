"""Building blocks (Linear, GLU, MLP, LayerNorm, Embedding, causal convolution, dropout, losses), one
module each.

Each follows the cell contract of ``minimal.contract`` and is listed in ``minimal.cells.REGISTRY``.
"""
