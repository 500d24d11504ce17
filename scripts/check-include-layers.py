#!/usr/bin/env python3
"""Fails when a file includes a header of a layer above its own (docs/contributing.md#layers).

Layers, lowest first: core, metrics, op (with spi, the backend SPI), net, onnx, train, dist and rl,
experiment, report and history; backends and the CLI sit on top and may include any of them. A file's layer is
its folder: include/deep500/<layer>/, or src/core, src/metrics, src/lv0 (op), src/lv1 (net),
src/onnx, src/lv2 (train), src/lv3 (dist), src/rl, src/experiment, src/report, src/history, src/backends,
src/cli.
Public headers include no private (src/) header, and a backend includes no other backend's
headers nor a lower layer's private ones: what backends use lives in the public headers and
deep500/spi/.

usage: check-include-layers.py [SOURCE_ROOT]   (exit 1 and one line per violation)
"""
import os
import re
import sys

RANK = {'core': 0, 'metrics': 1, 'op': 2, 'spi': 2, 'net': 3, 'onnx': 4, 'train': 5, 'dist': 6, 'rl': 6,
        'experiment': 7, 'report': 8, 'history': 8, 'backends': 9, 'cli': 10}
SRC_LAYER = {'core': 'core', 'metrics': 'metrics', 'lv0': 'op', 'lv1': 'net', 'onnx': 'onnx', 'lv2': 'train',
             'lv3': 'dist', 'rl': 'rl', 'experiment': 'experiment', 'report': 'report', 'history': 'history', 'backends': 'backends', 'cli': 'cli'}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def layer_of_file(rel):
    parts = rel.split('/')
    if parts[:2] == ['include', 'deep500'] and len(parts) > 3:
        return parts[2]
    if parts[0] == 'src' and len(parts) > 2:
        return SRC_LAYER.get(parts[1])
    return None


def layer_of_include(path, including_dir, root):
    """The layer of an included header, or None for headers outside the layered tree."""
    parts = path.split('/')
    if parts[0] == 'deep500' and len(parts) > 2:
        return parts[1], False
    if parts[0] in SRC_LAYER and os.path.exists(os.path.join(root, 'src', path)):
        return SRC_LAYER[parts[0]], True
    # A header next to the including file (or relative to it) belongs to that file's folder.
    local = os.path.normpath(os.path.join(including_dir, path))
    rel = os.path.relpath(local, root)
    if os.path.exists(local) and rel.startswith('src/'):
        return layer_of_file(rel), True
    return None, False


def backend_of(rel):
    """The backend folder a path under src/backends/ belongs to, or None."""
    parts = rel.split('/')
    return parts[2] if parts[:2] == ['src', 'backends'] and len(parts) > 3 else None


def other_backend(path, including_dir, root, rel):
    """The other backend whose private header `path` is, when a backend file includes one."""
    mine = backend_of(rel)
    if mine is None:
        return None
    candidates = [os.path.normpath(os.path.join(including_dir, path)), os.path.join(root, 'src', path)]
    for c in candidates:
        theirs = backend_of(os.path.relpath(c, root))
        if os.path.exists(c) and theirs is not None and theirs != mine:
            return theirs
    return None


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), '..'))
    violations = []
    for top in ('include', 'src'):
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            for name in sorted(files):
                if not name.endswith(('.h', '.hpp', '.cpp', '.cu', '.cuh', '.c')):
                    continue
                full = os.path.join(dirpath, name)
                rel = os.path.relpath(full, root)
                mine = layer_of_file(rel)
                if mine is None:
                    if rel.startswith('include/deep500/') and rel.count('/') == 2:
                        violations.append(f'{rel}: a public header outside the layer folders')
                    continue
                with open(full, encoding='utf-8', errors='replace') as f:
                    for number, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if not m:
                            continue
                        backend = other_backend(m.group(1), dirpath, root, rel)
                        if backend is not None:
                            violations.append(f'{rel}:{number}: backend {backend_of(rel)} includes "{m.group(1)}" '
                                              f'of backend {backend}; share it through deep500/spi/ instead')
                            continue
                        theirs, private = layer_of_include(m.group(1), dirpath, root)
                        if theirs is None:
                            continue
                        if theirs not in RANK:
                            violations.append(f'{rel}:{number}: includes "{m.group(1)}" of unknown layer {theirs}')
                        elif RANK[theirs] > RANK[mine]:
                            violations.append(f'{rel}:{number}: {mine} includes "{m.group(1)}" of layer {theirs}, '
                                              'which lies above it')
                        elif private and rel.startswith('include/'):
                            violations.append(f'{rel}:{number}: public header includes private "{m.group(1)}"')
                        elif private and mine == 'backends' and theirs != 'backends':
                            violations.append(f'{rel}:{number}: backend includes private "{m.group(1)}" of layer '
                                              f'{theirs}; backends use the public headers and deep500/spi/')
    for v in violations:
        print(v)
    if violations:
        print(f'{len(violations)} include(s) against the layer order (docs/contributing.md#layers)', file=sys.stderr)
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
