"""Building blocks (Linear, GLU, MLP, LayerNorm, Embedding, residual, causal convolution, dropout, losses), one
module each.

Each follows the cell contract of ``minimal.cells._contract`` and is listed in ``minimal.cells.REGISTRY``.
"""
