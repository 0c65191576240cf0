"""The course tooling: ``build`` makes the nbgrader course, the student edition, the site and the slides from the
lessons in ``notebooks/``; ``grading`` is what a lesson's check cells call (``grading.record``), ``judge`` compares
a submission's records with the instructor's, ``grader`` and ``sandbox`` run untrusted submissions for nbgrader,
``assignments`` grades and self-checks lessons, ``nbtidy`` strips run-to-run noise from notebooks. Nothing of the
library imports this package."""
