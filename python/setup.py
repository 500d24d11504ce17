"""Builds the extension with the project's CMake build and packs it with libdeep500.

The package is the directory CMake assembles (build/python/deep500: the Python files and
_core.*.so) plus libdeep500.so.0, which _core finds beside itself (its RUNPATH holds $ORIGIN).
D5_BUILD_DIR names the build directory (default: ../build next to this file), D5_SOURCE_DIR the
project (default: the directory above this file's); an unconfigured build directory is configured
first. Nothing is downloaded.
"""
import os
import pathlib
import re
import shutil
import subprocess

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = pathlib.Path(__file__).resolve().parent
ROOT = pathlib.Path(os.environ.get("D5_SOURCE_DIR", HERE.parent)).resolve()
BUILD = pathlib.Path(os.environ.get("D5_BUILD_DIR", ROOT / "build")).resolve()


def version():
    text = (ROOT / "CMakeLists.txt").read_text()
    return re.search(r"project\(deep500 VERSION ([0-9.]+)", text).group(1)


class BuildWithCMake(build_py):
    def run(self):
        if not (BUILD / "CMakeCache.txt").exists():
            subprocess.run(["cmake", "-S", str(ROOT), "-B", str(BUILD), "-DCMAKE_BUILD_TYPE=Release"], check=True)
        jobs = str(os.cpu_count() or 1)
        subprocess.run(["cmake", "--build", str(BUILD), "--target", "d5_python", "-j", jobs], check=True)
        built = BUILD / "python" / "deep500"
        if not any(built.glob("_core*.so")):
            raise SystemExit(f"{BUILD} built no Python extension: configure it with pybind11-dev and python3-dev "
                             "installed (scripts/install-deps.sh), D5_WITH_PYTHON not OFF")
        out = pathlib.Path(self.build_lib) / "deep500"
        if out.exists():
            shutil.rmtree(out)
        shutil.copytree(built, out, ignore=shutil.ignore_patterns("__pycache__"))
        shutil.copy2(BUILD / "lib" / "libdeep500.so.0", out / "libdeep500.so.0")  # follows the link


setup(version=version(), cmdclass={"build_py": BuildWithCMake})
