#!/usr/bin/python3
"""Generates ONNX's backend test cases (model.onnx + test_data_set_0/{input,output}_i.pb) into
OUT, with the node cases under OUT/node. CTest runs it once per test run (fixture onnx_cases);
the cases are never committed: they come from the installed python3-onnx.

Usage: generate_onnx_cases.py OUT
"""
import os
import shutil
import sys
import warnings


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__.strip().splitlines()[-1])
    out = os.path.abspath(sys.argv[1])

    import numpy as np
    # onnx 1.12's case generators still use the NumPy aliases removed in NumPy 1.24; merely
    # probing them warns on 1.2x, hence the filter.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, t in [("float", float), ("int", int), ("bool", bool), ("object", object),
                        ("complex", complex), ("str", str)]:
            if not hasattr(np, name):
                setattr(np, name, t)
    from onnx.backend.test import cmd_tools

    shutil.rmtree(out, ignore_errors=True)  # no stale cases from another ONNX version
    os.makedirs(os.path.join(out, "node"))  # ONNX 1.17's generator lists it before writing
    sys.argv = ["generate_onnx_cases", "generate-data", "-o", out]
    cmd_tools.main()
    node = os.path.join(out, "node")
    cases = [d for d in os.listdir(node) if os.path.exists(os.path.join(node, d, "model.onnx"))]
    if not cases:
        sys.exit(f"generate_onnx_cases: no node cases were generated under {node}")
    print(f"generated {len(cases)} ONNX node test cases under {node}")


if __name__ == "__main__":
    main()
