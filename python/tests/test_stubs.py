"""The type stub of deep500._core names exactly what the module has (a renamed or added binding
without its stub fails here)."""
import ast
import pathlib

import deep500._core as core

STUB = pathlib.Path(__file__).resolve().parents[1] / "deep500" / "_core.pyi"


def test_the_stub_and_the_module_name_the_same_things():
    tree = ast.parse(STUB.read_text())
    stubbed = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    stubbed |= {t.id for n in tree.body if isinstance(n, ast.AnnAssign) for t in [n.target]}
    public = {n for n in dir(core) if not n.startswith("__") or n == "__version__"}
    assert stubbed == public, f"only in the stub: {stubbed - public}; only in the module: {public - stubbed}"


def test_every_stubbed_class_member_exists():
    tree = ast.parse(STUB.read_text())
    for cls in (n for n in tree.body if isinstance(n, ast.ClassDef)):
        for member in cls.body:
            if isinstance(member, ast.FunctionDef) and member.name != "__init__":
                assert hasattr(getattr(core, cls.name), member.name), f"{cls.name}.{member.name}"
