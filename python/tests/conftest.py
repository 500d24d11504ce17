import os
import pathlib

import pytest


@pytest.fixture
def d5_binary() -> pathlib.Path:
    """The d5 executable of the same build (ctest sets D5_BINARY)."""
    path = pathlib.Path(os.environ["D5_BINARY"])
    assert path.is_file(), f"D5_BINARY={path} is not a file"
    return path
