"""Build hooks; the project's metadata is in pyproject.toml.

- The lessons' data ship in the wheel: ``data/`` is mapped to the package ``minimal._data`` (``minimal.data.DATA_ROOT``
  finds it), so that the lessons run from a plain ``pip install`` without a clone.
- A wheel carries the student edition of the course, not the instructor's notebooks: ``build_py`` writes
  ``minimal/_course/`` with ``minimal.course.build.student`` (solutions stripped) from ``notebooks/``; an editable install
  keeps using ``notebooks/``. ``python -m minimal course student OUT`` copies it out of an installed package.
"""
import sys
from pathlib import Path

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent


class BuildPyWithCourse(build_py):
    def run(self):
        super().run()
        if getattr(self, "editable_mode", False) or not (ROOT / "notebooks" / "README.md").is_file():
            return
        sys.path.insert(0, str(ROOT))
        try:
            from minimal.course import build as course
        finally:
            sys.path.pop(0)
        target = Path(self.build_lib) / "minimal" / "_course"
        course.student(target, notebooks=ROOT / "notebooks", force=True)
        (target / course.MANIFEST).unlink()


setup(
    packages=find_packages(include=["minimal*", "cuda_kernels*"]) + ["minimal._data"],
    package_dir={"minimal._data": "data"},
    package_data={"minimal._data": ["**/*"]},
    exclude_package_data={"minimal._data": ["**/__pycache__/*", "**/*.pyc"]},
    cmdclass={"build_py": BuildPyWithCourse},
)
