"""Building blocks (Linear, GLU, MLP, LayerNorm, Embedding, residual, losses), one module each.

Each follows the cell contract of ``minimal.cells._contract`` and is listed in ``minimal.cells.REGISTRY``.
"""
