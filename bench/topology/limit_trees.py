#!/usr/bin/env python3
"""Writes the two largest trees the topology reader accepts (docs/topology.md, "Errors").

nodes.json: 1,999,991 nodes (199,999 machines of 9 learners), the node limit's worst case.
names.json: the same shape with 38-character names, near the 256 MiB limit on names and full
names. Usage: limit_trees.py DIR; then time `flexplan topo show DIR/nodes.json` and the other.
"""
import json
import pathlib
import sys


def tree(pad):
    link = {"bandwidth": "10 Gbit/s", "latency": "1 us"}
    learners = {"name": "g{i}" + "x" * pad, "count": 9, "link": link}
    machines = {"name": "m{i}" + "y" * pad, "count": 199999, "link": link, "children": [learners]}
    return {"name": "limit", "root": {"name": "r", "children": [machines]}}


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: limit_trees.py DIR")
    out = pathlib.Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    (out / "nodes.json").write_text(json.dumps(tree(0)))
    (out / "names.json").write_text(json.dumps(tree(38)))


if __name__ == "__main__":
    main()
