"""deep500/_core.pyi, the PEP 484 type hints of the extension module, declares exactly what the
module defines: a binding added or renamed without its declaration fails
here (checked: deleting `_optimizer_names` from the file fails the first test)."""
import ast
import pathlib

import deep500._core as core

TYPE_HINTS = pathlib.Path(__file__).resolve().parents[1] / "deep500" / "_core.pyi"


def test_the_type_hints_and_the_module_name_the_same_things():
    tree = ast.parse(TYPE_HINTS.read_text())
    declared = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    declared |= {n.target.id for n in tree.body if isinstance(n, ast.AnnAssign)}
    public = {n for n in dir(core) if not n.startswith("__") or n == "__version__"}
    assert declared == public, f"only in _core.pyi: {declared - public}; only in the module: {public - declared}"


def test_every_declared_class_member_exists():
    tree = ast.parse(TYPE_HINTS.read_text())
    for cls in (n for n in tree.body if isinstance(n, ast.ClassDef)):
        for member in cls.body:
            if isinstance(member, ast.FunctionDef) and member.name != "__init__":
                assert hasattr(getattr(core, cls.name), member.name), f"{cls.name}.{member.name}"
