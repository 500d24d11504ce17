#!/usr/bin/python3
"""Every operator type d5 registers has traits, and each trait's ONNX opset is the one ONNX's own
schemas give (the first version in the default domain); a type ONNX does not define says 0.
Types newer than the installed onnx (which only knows opsets up to its own) are reported, not
judged.

Usage: check_op_traits.py D5_BINARY
"""
import json
import subprocess
import sys


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__.strip().splitlines()[-1])
    import onnx.defs
    listing = json.loads(subprocess.check_output([sys.argv[1], "ops", "list", "--format", "json"]))
    first = {}
    for s in onnx.defs.get_all_schemas_with_history():
        if s.domain == "":
            first[s.name] = min(first.get(s.name, s.since_version), s.since_version)
    newest = onnx.defs.onnx_opset_version()
    bad = []
    for entry in listing["ops"]:
        op, traits = entry["op"], entry["traits"]
        if traits is None:
            bad.append(f"{op}: registered but has no traits (src/lv0/op_traits.cpp)")
            continue
        since = traits["onnx_since"]
        if since > newest:
            print(f"{op}: ONNX opset {since} is newer than this onnx ({newest}); not checked")
        elif op in first and first[op] != since:
            bad.append(f"{op}: traits say ONNX opset {since}, onnx.defs says {first[op]}")
        elif op not in first and since != 0:
            bad.append(f"{op}: traits say ONNX opset {since}, but onnx {onnx.__version__} does not define it")
        elif op in first and since == 0:
            bad.append(f"{op}: traits say it is not ONNX, but ONNX defines it since opset {first[op]}")
    for b in bad:
        print("FAIL", b)
    print(f"{len(listing['ops'])} operator types checked against onnx {onnx.__version__}: {len(bad)} mismatch(es)")
    return 1 if bad else 0


if __name__ == "__main__":
    import onnx  # noqa: F401  (the version in the summary line)
    sys.exit(main())
