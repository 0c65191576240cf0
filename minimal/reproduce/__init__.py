"""The ``reproduce`` command, above the experiments it runs: ``work`` reproduces one work (its experiments, its
results page), ``index`` runs them all and writes ``results/index.md``, ``cli`` is the sub-command's parser."""
