"""Experiments of Feng et al., "Were RNNs All We Needed?" (minGRU, minLSTM): one module each, with ``Config``,
``Config.quick()``, ``run``, ``PAPER`` and ``plot`` (see ``minimal.experiments``)."""
