"""Data-generating tasks, one module each (fresh samples from a seeded ``numpy.random.Generator``)."""
