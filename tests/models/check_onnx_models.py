#!/usr/bin/python3
"""Runs onnx.checker.check_model(model, full_check=True) -- the structural checks plus ONNX's
strict shape inference -- on every *.onnx file in DIR (the models d5 exported); exits 1 naming
each model it rejects, and when DIR holds none.

Usage: check_onnx_models.py DIR
"""
import os
import sys


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__.strip().splitlines()[-1])
    import onnx

    folder = sys.argv[1]
    models = sorted(f for f in os.listdir(folder) if f.endswith(".onnx")) if os.path.isdir(folder) else []
    if not models:
        sys.exit(f"check_onnx_models: no .onnx files in {folder}")
    failed = []
    for name in models:
        path = os.path.join(folder, name)
        try:
            # A path (not a loaded proto) lets the checker resolve external data files.
            onnx.checker.check_model(path, full_check=True)
        except Exception as e:  # the checker raises ValidationError, shape inference InferenceError
            failed.append(name)
            print(f"{name}: REJECTED: {e}")
            continue
        print(f"{name}: ok")
    print(f"{len(models) - len(failed)} passed, {len(failed)} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
