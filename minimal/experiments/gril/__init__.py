"""Experiments of Tian et al., "Learning in the Recurrent State" (GRIL): one module each, with ``Config``,
``Config.quick()``, ``run``, ``PAPER`` and ``plot`` (see ``minimal.experiments``)."""
