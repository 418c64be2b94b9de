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
* ``sidecar-stub generate --preset demo|smoke|shift|large [--seed N] [--hours H] [--tus-per-project N]
  [--favorites N] [-o FILE]`` — write a scenario (:mod:`generate`), deterministic for a seed.
* ``sidecar-stub demo [--binary PATH] [--keep DIR]`` — generate the demo scenario into a temporary
  directory and replay it, printing the report.
* ``sidecar-stub diff TRACE_A TRACE_B`` — tasks in one trace and not the other (e.g. a run with
  ``crash`` lines against the same scenario without them); exit 0 when they are the same.
* Every input is checked before a replay starts (issue 7): the scenario, ``--binary`` (an
  executable file), ``--trace`` / ``--json`` (a writable file path), ``--data-dir`` and ``--keep``
  (``--keep`` on a folder of an earlier demo run reuses it; any other non-empty folder is refused
  with what to do).  Bad input, a broken pipe (``… | head``) and Ctrl-C are one line, never a
  traceback; the exit codes are :data:`EXIT_CODES` (also in ``--help``).
"""
from __future__ import annotations

import argparse
import asyncio
import math
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any, NoReturn

from electron_stub import scenario as sc

EXIT_CODES = """\
exit codes:
  0    replay: every expectation and consistency check held, every sidecar exited cleanly;
       diff: the traces have the same tasks
  1    replay: a check failed or a sidecar did not exit cleanly; diff: the traces differ
  2    bad input: command line, scenario (FILE:LINE named), trace, --binary, --trace, --keep …
  3    a sidecar could not be started or talked to (its stderr tail is printed)
  130  interrupted (Ctrl-C); running sidecars were stopped
  141  the output pipe was closed (e.g. piped into head)
"""
TEMPORARY = "(temporary; use --keep DIR to keep it)"  # demo files deleted when the run ends
DEMO_FILES = ("demo.jsonl", "demo.trace.jsonl", "demo.report.json", "data")  # what demo --keep writes


class InputError(Exception):
    """Bad input found before anything runs: one line, exit 2."""


def _number(kind: type, lo: float, what: str, *, above: bool = False) -> Any:
    """An argparse ``type``: a finite ``kind`` number ≥ ``lo`` (> ``lo`` with ``above``), else one
    line and exit 2 — ``generate --hours -1``/``0`` wrote a scenario that ``replay`` then refused
    (``duration_s must be > 0``, :mod:`electron_stub.lines`), ``--hours inf`` never finished
    (issue 23 item 6)."""
    def parse(text: str) -> Any:
        try:
            v = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not {'an integer' if kind is int else 'a number'}: {text!r}") from None
        if not math.isfinite(v) or v < lo or (above and v == lo):
            raise argparse.ArgumentTypeError(f"{text}: {what}")
        return v
    return parse


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _check_output(path: str, flag: str) -> None:
    """``path`` can be written: its folder exists and is writable, and it is not a folder."""
    p = Path(path)
    if p.is_dir():
        raise InputError(f"{flag} {path} is a folder; give a file name")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise InputError(f"{flag} {path}: folder {parent} does not exist (mkdir -p {parent})")
    if not os.access(parent, os.W_OK) or (p.exists() and not os.access(p, os.W_OK)):
        raise InputError(f"{flag} {path}: not writable")


def _check_binary(binary: str | None) -> None:
    if binary is None:
        return
    p = Path(binary)
    if not p.is_file():
        raise InputError(f"--binary {binary}: no such file (build it with ./run build)")
    if not os.access(p, os.X_OK):
        raise InputError(f"--binary {binary}: not executable")


def _replay(path: str, trace: str | None, binary: str | None, data_dir: str | None, quiet: bool,
            json_out: str | None = None, temporary: bool = False, batch: bool = True,
            html_out: str | None = None, push: bool = True) -> int:
    from electron_stub import report
    from electron_stub.machine import MachineError
    from electron_stub.replay import Replay

    try:
        scenario = sc.load(path)
    except sc.ScenarioError as exc:
        raise InputError(str(exc)) from None
    _check_binary(binary)
    for out, flag in ((trace, "--trace"), (json_out, "--json"), (html_out, "--html")):
        if out:
            _check_output(out, flag)
    if data_dir and any(Path(data_dir).glob("m*/*")):
        raise InputError(f"--data-dir {data_dir} already holds machine data (m1/ …): a sidecar would "
                         "restore that state; use an empty directory")
    if data_dir and Path(data_dir).exists() and not Path(data_dir).is_dir():
        raise InputError(f"--data-dir {data_dir} is not a folder")
    rp = Replay(scenario, data_dir=data_dir, binary=binary, quiet=quiet, logs_kept=not temporary,
                batch=batch, push=push)
    try:
        asyncio.run(rp.run())
    except MachineError as exc:
        print(f"sidecar-stub: sidecar failure: {exc}", file=sys.stderr)
        return 3
    violations = rp.verdict()
    # the files first, then the terminal: a reader that goes away (… | head) loses no file
    n = rp.rec.write(trace) if trace else 0
    summary = report.summarize(rp.rec, rp.results, violations, rp.stats)
    if json_out:
        report.write_json(summary, json_out)
    if html_out:
        from sidecar.cli.report_html import write_html
        write_html(summary, html_out)
    if trace and not quiet:
        print(f"trace: {n} lines → {trace}" + (f"  {TEMPORARY}" if temporary else ""))
    report.show(summary, quiet=quiet)
    return report.exit_code(rp.results, violations, rp.stats)


def _report(a: argparse.Namespace) -> int:
    """Re-read a saved JSON report (``replay --json``) and write its HTML view, without replaying."""
    import json

    from sidecar.cli.report_html import write_html

    try:
        summary = json.loads(Path(a.report).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InputError(f"{a.report}: cannot read the JSON report: {exc}") from None
    if not isinstance(summary, dict) or "series" not in summary:
        raise InputError(f"{a.report}: not a JSON report of sidecar-stub replay --json (no 'series')")
    _check_output(a.html, "--html")
    write_html(summary, a.html)
    print(f"html: {a.html}")
    return 0


def _generate(a: argparse.Namespace) -> int:
    from electron_stub import generate

    if a.output and a.output != "-":
        _check_output(a.output, "-o")
    lines = generate.generate(a.preset, seed=a.seed, hours=a.hours, tus_per_project=a.tus_per_project,
                              favorites=a.favorites)
    text = generate.dumps(lines)
    if a.output and a.output != "-":
        Path(a.output).write_text(text, encoding="utf-8")
        print(f"{len(lines)} lines → {a.output}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


def _keep_folder(keep: str) -> Path:
    """``--keep DIR``: a new or empty folder, or one an earlier demo run wrote (reused: its demo
    files are replaced).  Anything else is refused with what to do."""
    root = Path(keep)
    if root.exists() and not root.is_dir():
        raise InputError(f"--keep {keep} is a file; give a folder")
    if root.is_dir():
        others = sorted(p.name for p in root.iterdir() if p.name not in DEMO_FILES)
        if others:
            raise InputError(f"--keep {keep} holds other files ({', '.join(others[:3])}…); give a new or "
                             f"empty folder, or one an earlier demo --keep wrote")
        if (root / "data").exists():
            print(f"reusing {keep}: replacing the earlier demo run there", file=sys.stderr)
            shutil.rmtree(root / "data")
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"--keep {keep}: cannot create: {exc.strerror or exc}") from None
    if not os.access(root, os.W_OK):
        raise InputError(f"--keep {keep}: not writable")
    return root


def _demo(a: argparse.Namespace) -> int:
    from electron_stub import generate

    _check_binary(a.binary)
    root_keep = _keep_folder(a.keep) if a.keep else None
    with tempfile.TemporaryDirectory(prefix="sidecar-stub-demo-") as tmp:
        root = root_keep or Path(tmp)
        path = root / "demo.jsonl"
        path.write_text(generate.dumps(generate.generate("demo")), encoding="utf-8")
        print(f"demo scenario: {path}" + ("" if a.keep else f"  {TEMPORARY}"))
        return _replay(str(path), str(root / "demo.trace.jsonl"), a.binary, str(root / "data"), False,
                       a.json, temporary=not a.keep)


DIFF_LIMIT = 50  # tasks listed per side unless --limit / --all says otherwise


def _diff(a: argparse.Namespace) -> int:
    from electron_stub import trace

    try:
        d = trace.task_diff(trace.read(a.a), trace.read(a.b))
    except trace.TraceError as exc:
        raise InputError(str(exc)) from None
    except (KeyError, TypeError) as exc:
        raise InputError(f"{a.a} / {a.b}: a task line lacks {exc} (not a sidecar-stub trace?)") from None
    if a.limit < 0:
        raise InputError(f"--limit {a.limit}: must be 0 (all) or more")
    for side, path in (("only_a", a.a), ("only_b", a.b)):
        tasks = d[side]
        shown = tasks if a.limit == 0 else tasks[:a.limit]
        print(f"{len(tasks)} task(s) only in {path}")
        for x in shown:
            close = x["close"] or ("open", None)
            print(f"  {x['at']:>10.3f} {x['type']:<20} {x['tu']}/{x['ru']} {x['source']} {x['task_id']} "
                  f"→ {close[0]}{'' if close[1] is None else f' at {close[1]:.3f}'}")
        if len(shown) < len(tasks):  # never cut a list without saying so
            print(f"  … {len(tasks) - len(shown)} more (--all or --limit N shows them)")
    return 0 if not d["only_a"] and not d["only_b"] else 1


def parser() -> argparse.ArgumentParser:
    ap = _Parser(prog="sidecar-stub", description="Electron stub harness for the operator sidecar",
                 epilog=EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("replay", help="replay a scenario against the sidecar")
    r.add_argument("scenario")
    r.add_argument("--trace", help="write the trace (JSON lines) here")
    r.add_argument("--binary", help="frozen sidecar binary (default: python -m sidecar)")
    r.add_argument("--data-dir", help="where the machines' data dirs go (default: a temp dir)")
    r.add_argument("--quiet", action="store_true", help="print only failures and the result")
    r.add_argument("--json", help="also write the report's summary as JSON here (for tools)")
    r.add_argument("--html", help="also write the report as one self-contained HTML file here (plots)")
    r.add_argument("--no-batch", action="store_true",
                   help="send each world event after its own clock.advance_to instead of one "
                        "platform.events frame that advances too (same result, more round trips)")
    r.add_argument("--no-push", action="store_true",
                   help="ask every poll pass by platform.request round trip instead of pushing its "
                        "answer into the frame (same result, more round trips)")
    from electron_stub.generate import PRESETS

    def preset_default(key: str) -> str:
        return ", ".join(f"{name} {cfg[key]:g}" for name, cfg in PRESETS.items())

    g = sub.add_parser("generate", help="write a scenario",
                       description="Write a generated scenario (JSON lines). A flag left out takes "
                                   "the preset's value.")
    g.add_argument("--preset", choices=tuple(PRESETS), default="demo",
                   help="the world and timeline to start from (default: demo)")
    g.add_argument("--seed", type=int, help=f"seed of the world and timeline (default: the preset's — {preset_default('seed')})")
    g.add_argument("--hours", type=_number(float, 0, "hours must be a finite number above 0 (replay refuses duration_s <= 0)", above=True), help=f"virtual hours of the timeline (default: {preset_default('hours')})")
    g.add_argument("--tus-per-project", type=_number(int, 1, "at least 1 TU per project"),
                   help=f"TUs per project (default: {preset_default('tus_per_project')})")
    g.add_argument("--favorites", type=_number(int, 0, "favorites per TU cannot be negative"), help=f"favorites per TU (default: {preset_default('favorites')})")
    g.add_argument("-o", "--output", help="file (default: stdout)")
    d = sub.add_parser("demo", help="generate the demo scenario and replay it",
                       description="Generate the demo preset (1 virtual hour: a crash, a shift change, "
                                   "a Stack fault) into a temporary folder, replay it and print the report.")
    d.add_argument("--binary", help="frozen sidecar binary (default: python -m sidecar)")
    d.add_argument("--keep", help="keep scenario, trace and data dirs here (a new folder, or one an "
                                  "earlier demo --keep wrote: reused; default: a temporary folder, removed)")
    d.add_argument("--json", help="also write the report's summary as JSON here (for tools)")
    f = sub.add_parser("diff", help="tasks that differ between two traces",
                       description="Print the tasks in one trace and not the other (compared by task id, "
                                   "type, TU, RU, source, creation time, deadline and close). Exit 0: same tasks; 1: they differ.")
    f.add_argument("a", metavar="TRACE_A", help="first trace (JSON lines, sidecar-stub replay --trace)")
    f.add_argument("b", metavar="TRACE_B", help="second trace")
    f.add_argument("--limit", type=int, metavar="N", default=DIFF_LIMIT,
                   help=f"show at most N tasks per side (default: {DIFF_LIMIT}; 0 = all)")
    f.add_argument("--all", dest="limit", action="store_const", const=0, help="show every task (= --limit 0)")
    rr = sub.add_parser("report", help="write the HTML view of a saved JSON report (replay --json), without replaying")
    rr.add_argument("report", metavar="REPORT_JSON")
    rr.add_argument("--html", required=True, help="the HTML file to write")
    s = sub.add_parser("senders", help="sender health tools (seed 000)")
    ss = s.add_subparsers(dest="senders_cmd", required=True)
    sim = ss.add_parser("simulate", help="run the health machine on a virtual fleet: a group recipe beside the no-group "
                                          "baseline, held-back time, seed 000's claims for that recipe")
    sim.add_argument("--senders", type=int, help="senders in the fleet (default: 660)")
    sim.add_argument("--days", type=float, default=7.0, help="virtual days to run (default: 7)")
    sim.add_argument("--group", action="append", default=[],
                     help='a group of the recipe: "failed_in_row=3,cooldown_delay_from=15,cooldown_delay_to=45,'
                          'send_from_message_interval=2,send_to_message_interval=5,from_time=08:00,to_time=20:00,'
                          'priority=2,name=day" (delays and send intervals in minutes, windows UTC); repeat it '
                          "for several groups on the same senders (the first wins an overlap unless priority= says "
                          "otherwise) (default: no recipe — the model's prod-like mix, seed 000 §5)")
    sim.add_argument("--group-share", type=float, metavar="F",
                     help="the share of senders in the recipe's groups, 0–1 (default: 1; prod has 132 of 660 = 0.2)")
    sim.add_argument("--senders-from", metavar="DATA_DIR",
                     help="take the senders and their groups from a sidecar data dir's sidecar.db "
                          "(default: none — --senders and --group say who is in which group)")
    sim.add_argument("--json", action="store_true", help="print the result as one JSON object (for tools)")
    sim.add_argument("--html", metavar="FILE", help="also write the tables as one self-contained HTML page (default: none)")
    sim.add_argument("--seed", type=int, default=0, help="seed of the keyed randomness (default: 0)")
    return ap


def main(argv: list[str] | None = None) -> int:
    try:
        a = parser().parse_args(argv)
        if a.cmd == "replay":
            return _replay(a.scenario, a.trace, a.binary, a.data_dir, a.quiet, a.json,
                           batch=not a.no_batch, html_out=a.html, push=not a.no_push)
        if a.cmd == "report":
            return _report(a)
        if a.cmd == "generate":
            return _generate(a)
        if a.cmd == "diff":
            return _diff(a)
        if a.cmd == "senders":
            from .fleet import InputError as FleetInputError, run as simulate_fleet
            try:
                if a.html is not None:
                    _check_output(a.html, "--html")
                return simulate_fleet(a.senders, a.days, a.group, a.seed, share=a.group_share,
                                      senders_from=a.senders_from, as_json=a.json, html=a.html)
            except FleetInputError as exc:
                raise InputError(str(exc)) from None
        return _demo(a)
    except InputError as exc:
        print(f"sidecar-stub: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("sidecar-stub: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # the reader went away (… | head): stop quietly; point stdout at devnull so the
        # interpreter's final flush does not print a traceback either
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except OSError:
            pass
        return 141


if __name__ == "__main__":
    sys.exit(main())
