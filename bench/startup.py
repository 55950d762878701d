"""Start-up cost of an `anyy` command, as whole processes, against a bare Python.

Three commands with a default config (only a model, pointed at bench/fake_model_server.py, which runs in
its own process): `anyy --help`, `anyy doctor`, and `printf 'hello\\n' | anyy chat` timed until the reply
text appears on its stdout (the first reply). Each is measured against `python -c "import asyncio,
sqlite3"` in alternated pairs: every pair runs the bare interpreter and the command (in one tree, or in
each of two trees), in an order that alternates from pair to pair; the ratio is taken pair by pair and
reported as median (min-max). Per command and tree it also reports the modules loaded when the process
exits and its peak RSS (the median of its pairs).

    .venv/bin/python bench/startup.py [--pairs 10] [--before /path/to/other/tree] [--python PATH] [--json]

Without --before only this tree is measured. --python runs the commands and the bare interpreter with
another environment's Python (one with only Anyy's dependencies installed, say; the fake model still
runs with this one, which has the test dependencies). Each tree runs with its own directory on PYTHONPATH and its
own data directory; one warm-up round (which also creates the stores) is not counted.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BARE = "import asyncio, sqlite3"
COMMANDS = ("help", "doctor", "chat")
# Writes every loaded module's name when `python -m gateway.cli ARGS` exits.
DUMP = ("import atexit, runpy, sys\n"
        "out = sys.argv.pop(1)\n"
        "atexit.register(lambda: open(out, 'w').write('\\n'.join(n for n, m in sys.modules.items() if m)))\n"
        "runpy.run_module('gateway.cli', run_name='__main__', alter_sys=True)\n")


@dataclass
class Tree:
    """One checkout under test: its directory, its environment, its config."""

    name: str
    root: Path
    env: dict[str, str]
    config: Path
    python: str

    def argv(self, command: str) -> list[str]:
        args = {"help": ["--help"], "doctor": ["doctor"], "chat": ["chat"]}[command]
        return [*args, *(["--config", str(self.config)] if command != "help" else [])]


@dataclass
class Series:
    seconds: list[float] = field(default_factory=list)
    ratios: list[float] = field(default_factory=list)
    rss_kib: list[int] = field(default_factory=list)
    modules: int = 0


def run(argv: list[str], env: dict[str, str], cwd: Path, stdin: bytes | None = None,
        until: bytes | None = None) -> tuple[float, int]:
    """Run a process to its end; (seconds until `until` appeared on its stdout, or until it exited;
    its peak RSS in KiB)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)
    assert proc.stdin is not None and proc.stdout is not None
    if stdin:
        proc.stdin.write(stdin)
    proc.stdin.close()
    seen, buffered, elapsed = until is None, b"", None
    while chunk := os.read(proc.stdout.fileno(), 65536):  # returns what has arrived, b"" at the end
        if until is not None and not seen:
            buffered += chunk
            if until in buffered:
                seen, elapsed = True, time.perf_counter() - t0
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if elapsed is None:
        elapsed = time.perf_counter() - t0
    if not seen:
        raise SystemExit(f"{argv[2:]} never printed {until!r} (exit {proc.returncode})")
    return elapsed, usage.ru_maxrss


def command(tree: Tree, name: str) -> tuple[float, int]:
    if name == "chat":
        return run([tree.python, "-m", "gateway.cli", *tree.argv(name)], tree.env, tree.root,
                   stdin=b"hello\n", until=b"About 'hello'")
    return run([tree.python, "-m", "gateway.cli", *tree.argv(name)], tree.env, tree.root)


def modules(tree: Tree, name: str, scratch: Path) -> int:
    out = scratch / f"{tree.name}-{name}.modules"
    subprocess.run([tree.python, "-c", DUMP, str(out), *tree.argv(name)], env=tree.env, cwd=tree.root,
                   input=b"hello\n" if name == "chat" else b"", stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, check=False)
    return len(out.read_text().split())


def bare_modules(python: str) -> int:
    out = subprocess.run([python, "-c", f"{BARE}\nimport sys\nprint(len(sys.modules))"],
                         capture_output=True, text=True, check=True)
    return int(out.stdout)


def make_tree(name: str, root: Path, scratch: Path, model_url: str, python: str) -> Tree:
    home = scratch / name
    (home / "data").mkdir(parents=True)
    config = home / "config.toml"
    config.write_text(f'[model]\nbase_url = "{model_url}"\nmodel = "fake-1"\n')
    # Bytecode is written and used, as in an installed Anyy: with PYTHONDONTWRITEBYTECODE set (some
    # sandboxes set it) every process would compile every module of the project again.
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANYY_") and k != "PYTHONDONTWRITEBYTECODE"}
    env.update(HOME=str(home), ANYY_HOME=str(home / "data"), PYTHONPATH=str(root), TZ="UTC")
    return Tree(name, root, env, config, python)


def summary(values: list[float], unit: str = "", scale: float = 1.0) -> str:
    v = [x * scale for x in values]
    return f"{statistics.median(v):.2f}{unit} ({min(v):.2f}–{max(v):.2f})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pairs", type=int, default=10)
    ap.add_argument("--before", type=Path, help="another checkout to measure in the same pairs")
    ap.add_argument("--python", default=sys.executable, help="the interpreter of the commands and the bare run")
    ap.add_argument("--json", action="store_true", help="print the raw figures as JSON as well")
    args = ap.parse_args()
    server = subprocess.Popen([sys.executable, str(ROOT / "bench" / "fake_model_server.py")],
                              stdout=subprocess.PIPE, text=True)
    assert server.stdout is not None
    url = server.stdout.readline().strip()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            scratch = Path(tmp)
            trees = [make_tree("after", ROOT, scratch, url, args.python)]
            if args.before:
                trees.insert(0, make_tree("before", args.before.resolve(), scratch, url, args.python))
            results, versus = measure(trees, args.pairs, scratch)
    finally:
        server.terminate()
        server.wait()
    report(trees, results, versus, args.pairs, args.python)
    if args.json:
        print(json.dumps({"runs": {f"{t}/{c}": vars(s) for (t, c), s in results.items()},
                          "after_over_before": versus}, indent=1))


def measure(trees: list[Tree], pairs: int,
            scratch: Path) -> tuple[dict[tuple[str, str], Series], dict[str, list[float]]]:
    """Per (tree or "bare", command): the series; per command: after / before, pair by pair."""
    results = {(t.name, c): Series() for t in trees for c in COMMANDS}
    results |= {("bare", c): Series() for c in COMMANDS}
    versus: dict[str, list[float]] = {c: [] for c in COMMANDS}
    for c in COMMANDS:
        for t in trees:  # warm-up: page cache, .pyc files, the store's creation and migration
            command(t, c)
            results[t.name, c].modules = modules(t, c, scratch)
        results["bare", c].modules = bare_modules(trees[0].python)
        for i in range(pairs):
            runs: list[str] = ["bare", *(t.name for t in trees)]
            if i % 2:
                runs.reverse()
            times: dict[str, float] = {}
            for who in runs:
                if who == "bare":
                    seconds, rss = run([trees[0].python, "-c", BARE], os.environ.copy(), ROOT)
                else:
                    seconds, rss = command(next(t for t in trees if t.name == who), c)
                times[who] = seconds
                results[who, c].seconds.append(seconds)
                results[who, c].rss_kib.append(rss)
            for t in trees:
                results[t.name, c].ratios.append(times[t.name] / times["bare"])
            if len(trees) == 2:
                versus[c].append(times["after"] / times["before"])
    return results, versus


def report(trees: list[Tree], results: dict[tuple[str, str], Series], versus: dict[str, list[float]],
           pairs: int, python: str) -> None:
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"{pairs} alternated pairs per command; load average {load}; {python}")
    label = {"help": "anyy --help", "doctor": "anyy doctor", "chat": "chat, first reply"}
    print("| command | tree | wall, median (min–max) | × bare python, paired | modules | peak RSS |")
    print("|---|---|---|---|---|---|")
    for c in COMMANDS:
        bare = results["bare", c]
        print(f"| {label[c]} | bare python | {summary(bare.seconds, ' s')} | 1 | {bare.modules} | "
              f"{statistics.median(bare.rss_kib) / 1024:.0f} MiB |")
        for t in trees:
            s = results[t.name, c]
            print(f"| {label[c]} | {t.name} | {summary(s.seconds, ' s')} | {summary(s.ratios, '×')} | "
                  f"{s.modules} | {statistics.median(s.rss_kib) / 1024:.0f} MiB |")
        if len(trees) == 2:
            print(f"| {label[c]} | after / before, paired | | {summary(versus[c], '×')} | | |")


if __name__ == "__main__":
    main()
