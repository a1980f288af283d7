#!/usr/bin/python3
"""Prints the import graph of bench/*.py (imports anywhere in a file, inside functions too) and
any cycle in it; exits 1 if there is one. `python3 bench/import_graph.py`."""
import ast
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def graph():
    mods = {f[:-3] for f in os.listdir(HERE) if f.endswith(".py")}
    edges = {}
    for m in sorted(mods):
        tree = ast.parse(open(os.path.join(HERE, m + ".py")).read())
        deps = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                deps |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                deps.add(node.module.split(".")[0])
        edges[m] = sorted(deps & mods - {m})
    return edges


def cycles(edges):
    """Every cycle found by a depth-first walk (each reported once, from its smallest module)."""
    found, state = set(), {}

    def walk(m, path):
        state[m] = "open"
        for d in edges[m]:
            if state.get(d) == "open":
                c = path[path.index(d):]
                i = c.index(min(c))
                found.add(tuple(c[i:] + c[:i]))
            elif d not in state:
                walk(d, path + [d])
        state[m] = "done"

    for m in edges:
        if m not in state:
            walk(m, [m])
    return sorted(found)


if __name__ == "__main__":
    edges = graph()
    for m, deps in edges.items():
        print("%-18s -> %s" % (m, ", ".join(deps) or "-"))
    found = cycles(edges)
    for c in found:
        print("cycle: " + " -> ".join(c + (c[0],)))
    print("%d modules, %d imports between them, %s" % (len(edges), sum(map(len, edges.values())),
                                                       "%d cycles" % len(found) if found else "no cycle"))
    sys.exit(1 if found else 0)
