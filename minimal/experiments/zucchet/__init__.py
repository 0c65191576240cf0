"""Experiments of Zucchet et al., "Gated recurrent neural networks discover attention" (ICML 2024): one module
each, with ``Config``, ``Config.quick()``, ``run``, ``PAPER`` and ``plot`` (see ``minimal.experiments``)."""
