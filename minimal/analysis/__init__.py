"""Analysis of trained networks: polynomials, identification scores, pruning, optimal GD step sizes."""
