"""The course tooling: from the lessons in ``notebooks/``, ``build`` makes the student edition (and reads the
lessons for the others), ``site`` the HTML site, ``slides`` the reveal.js decks; ``grading`` is what a lesson's
check cells call (``grading.record``), ``judge`` compares a submission's records with the instructor's, ``grader``
and ``sandbox`` run untrusted submissions for nbgrader, ``assignments`` grades and self-checks lessons, ``nbtidy``
strips run-to-run noise from notebooks. Nothing of the library imports this package."""
