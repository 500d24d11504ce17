"""Builds the extension with the project's CMake build and packs it with an installed tree.

The package is the directory CMake assembles (build/python/deep500: the Python files and
_core.*.so) plus deep500/_d5, the run-time part of `cmake --install`: bin/d5 (what run_recipe and
the `d5` command of the environment run), lib/libdeep500.so.0 (which _core finds through its
RUNPATH, $ORIGIN/_d5/LIBDIR), and the data d5 reads (share/deep500, include for custom operators).
The package therefore works without the build and the sources it came from.
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
        install_runtime_tree(out / "_d5")


def cached(name):
    """A variable of the build's CMakeCache.txt."""
    text = (BUILD / "CMakeCache.txt").read_text()
    return re.search(rf"^{name}:[A-Z]+=(.*)$", text, re.M).group(1)


def install_runtime_tree(tree):
    """`cmake --install` into `tree`, less what only a C++ project building against it needs. A wheel
    holds no symbolic links (each would become a copy of the 17 MB library): the library is kept
    once, under its SONAME."""
    subprocess.run(["cmake", "--install", str(BUILD), "--prefix", str(tree)], check=True, stdout=subprocess.DEVNULL)
    libdir = tree / cached("CMAKE_INSTALL_LIBDIR")
    shutil.rmtree(libdir / "cmake", ignore_errors=True)
    real = (libdir / "libdeep500.so.0").resolve()
    for link in libdir.glob("libdeep500.so*"):
        if link.is_symlink():
            link.unlink()
    real.rename(libdir / "libdeep500.so.0")


setup(version=version(), cmdclass={"build_py": BuildWithCMake})
