import os
import pathlib

import pytest


def pytest_configure(config):
    # Tests of what a reduced build leaves out run as a ctest of their own, registered only where
    # the build has it (python/CMakeLists.txt): a skip inside one ctest would pass unseen.
    config.addinivalue_line("markers", "full_build: needs ONNX and oneDNN (ctest python_package_full_build)")


@pytest.fixture
def d5_binary() -> pathlib.Path:
    """The d5 executable of the same build (ctest sets D5_BINARY)."""
    path = pathlib.Path(os.environ["D5_BINARY"])
    assert path.is_file(), f"D5_BINARY={path} is not a file"
    return path
