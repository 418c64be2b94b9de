"""``sidecar-stub``: replay a scenario against the sidecar, generate scenarios, run the demo.

Rules / theory of operation
---------------------------
* ``sidecar-stub replay SCENARIO [--trace FILE] [--binary PATH] [--data-dir DIR] [--quiet]`` —
  parse the scenario (a bad one: one line ``sidecar-stub: error: FILE:LINE: what``, exit 2; a
  ``--data-dir`` that already holds machine data is refused the same way, since a sidecar would
  restore it),
  replay it (:mod:`replay`), write the trace if asked, print the report (``--quiet``: only the
  failures and the result line), exit 0 only when every expectation and consistency check holds
  and every sidecar exited cleanly, else 1.  A sidecar that cannot be started or talked to is
  exit 3 with its stderr tail.
* ``sidecar-stub generate --preset demo|smoke|shift [--seed N] [--hours H] [--tus-per-project N]
  [--favorites N] [-o FILE]`` — write a scenario (:mod:`generate`), deterministic for a seed.
* ``sidecar-stub demo [--binary PATH] [--keep DIR]`` — generate the demo scenario into a temporary
  directory and replay it, printing the report.
* ``sidecar-stub diff TRACE_A TRACE_B`` — tasks in one trace and not the other (e.g. a run with
  ``crash`` lines against the same scenario without them); exit 0 when they are the same.
"""
from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path

from electron_stub import scenario as sc


def _replay(path: str, trace: str | None, binary: str | None, data_dir: str | None, quiet: bool) -> int:
    from electron_stub import report
    from electron_stub.machine import MachineError
    from electron_stub.replay import Replay

    try:
        scenario = sc.load(path)
    except sc.ScenarioError as exc:
        print(f"sidecar-stub: error: {exc}", file=sys.stderr)
        return 2
    if data_dir and any(Path(data_dir).glob("m*/*")):
        print(f"sidecar-stub: error: --data-dir {data_dir} already holds machine data (m1/ …): a sidecar would "
              "restore that state; use an empty directory", file=sys.stderr)
        return 2
    rp = Replay(scenario, data_dir=data_dir, binary=binary, quiet=quiet)
    try:
        asyncio.run(rp.run())
    except MachineError as exc:
        print(f"sidecar-stub: sidecar failure: {exc}", file=sys.stderr)
        return 3
    except KeyboardInterrupt:
        print("sidecar-stub: interrupted", file=sys.stderr)
        return 130
    violations = rp.verdict()
    if trace:
        n = rp.rec.write(trace)
        if not quiet:
            print(f"trace: {n} lines → {trace}")
    text = report.render(rp.rec, rp.results, violations, rp.stats)
    if quiet:
        keep = [ln for ln in text.splitlines() if "FAIL" in ln or "NOT CLEAN" in ln or ln.startswith("  result")]
        text = "\n".join(keep)
    print(text)
    return report.exit_code(rp.results, violations, rp.stats)


def _generate(a: argparse.Namespace) -> int:
    from electron_stub import generate

    lines = generate.generate(a.preset, seed=a.seed, hours=a.hours, tus_per_project=a.tus_per_project,
                              favorites=a.favorites)
    text = generate.dumps(lines)
    if a.output and a.output != "-":
        Path(a.output).write_text(text, encoding="utf-8")
        print(f"{len(lines)} lines → {a.output}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


def _demo(a: argparse.Namespace) -> int:
    from electron_stub import generate

    with tempfile.TemporaryDirectory(prefix="sidecar-stub-demo-") as tmp:
        root = Path(a.keep) if a.keep else Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        path = root / "demo.jsonl"
        path.write_text(generate.dumps(generate.generate("demo")), encoding="utf-8")
        print(f"demo scenario: {path}" + ("" if a.keep else "  (temporary: pass --keep DIR to keep it)"))
        return _replay(str(path), str(root / "demo.trace.jsonl"), a.binary, str(root / "data"), False)


def _diff(a: argparse.Namespace) -> int:
    from electron_stub import trace

    d = trace.task_diff(trace.read(a.a), trace.read(a.b))
    for side, path in (("only_a", a.a), ("only_b", a.b)):
        print(f"{len(d[side])} task(s) only in {path}")
        for x in d[side][:50]:
            close = x["close"] or ("open", None)
            print(f"  {x['at']:>10.3f} {x['type']:<20} {x['tu']}/{x['ru']} {x['source']} {x['task_id']} "
                  f"→ {close[0]}{'' if close[1] is None else f' at {close[1]:.3f}'}")
    return 0 if not d["only_a"] and not d["only_b"] else 1


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="sidecar-stub", description="Electron stub harness for the operator sidecar")
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("replay", help="replay a scenario against the sidecar")
    r.add_argument("scenario")
    r.add_argument("--trace", help="write the trace (JSON lines) here")
    r.add_argument("--binary", help="frozen sidecar binary (default: python -m sidecar)")
    r.add_argument("--data-dir", help="where the machines' data dirs go (default: a temp dir)")
    r.add_argument("--quiet", action="store_true", help="print only failures and the result")
    g = sub.add_parser("generate", help="write a scenario")
    g.add_argument("--preset", choices=("demo", "smoke", "shift"), default="demo")
    g.add_argument("--seed", type=int)
    g.add_argument("--hours", type=float)
    g.add_argument("--tus-per-project", type=int)
    g.add_argument("--favorites", type=int)
    g.add_argument("-o", "--output", help="file (default: stdout)")
    d = sub.add_parser("demo", help="generate the demo scenario and replay it")
    d.add_argument("--binary")
    d.add_argument("--keep", help="keep scenario, trace and data dirs here")
    f = sub.add_parser("diff", help="tasks that differ between two traces")
    f.add_argument("a")
    f.add_argument("b")
    return ap


def main(argv: list[str] | None = None) -> int:
    a = parser().parse_args(argv)
    if a.cmd == "replay":
        return _replay(a.scenario, a.trace, a.binary, a.data_dir, a.quiet)
    if a.cmd == "generate":
        return _generate(a)
    if a.cmd == "diff":
        return _diff(a)
    return _demo(a)


if __name__ == "__main__":
    sys.exit(main())
