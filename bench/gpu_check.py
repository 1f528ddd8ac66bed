"""The GPU check: the CUDA paths CPU tests can only emulate, and real-size throughput, offline.

    bash bench/gpu_check.sh [--call 1|2] [--wheels DIR] [--report DIR] [--steps A,B] [--cpu] [--plan] [WORK]

Every step runs in its own process with its own time limit, its output kept in WORK/logs/STEP.log;
a step whose Python packages are missing is skipped with one SKIP line, and so is a step whose
prerequisite step did not pass. The summary gives PASS / FAIL / SKIP per step and the real-size
throughput table; exit 1 if any step failed, 2 on bad input.

The lent machine (one H200, 15 minutes of device time in all) runs the check in two calls of under
six minutes each (``--plan`` prints them): ``--call 1`` with the machine's own packages, ``--call 2``
with bitsandbytes and datasets carried as wheels (``--wheels DIR``). ``--cpu`` runs the same steps
on the CPU at toy size with the device checks off: the dry run that makes sure no device minute is
lost on a typo. The machine's torch and transformers are used as they are; the check prints their
versions and warns where they differ from requirements.txt.

Everything the steps build or write (models, data, caches, temporary files) stays in WORK.
GPU_CHECK_HIDE=pkg,pkg makes packages look absent (bench/gpu_hide), to rehearse the skips.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path[:0] = [str(BENCH), str(REPO / "src")]
from gpu_plan import (BY_NAME, CALL_WHEELS, CPU_LIMIT_FACTOR, DATASETS_EXTRA_WHEELS, WHEELS_LIMIT_S,  # noqa: E402
                      Context, Step, plan_text, selected_steps, skip_reason, with_prerequisites)
from gpu_realsize import ROWS_FILE, keep_earlier_rows, latest_rows, read_rows, throughput_table  # noqa: E402
from masprm.cli import ArgumentParser  # noqa: E402

# distribution name -> module name, in the order the versions are printed
PACKAGES = {"torch": "torch", "transformers": "transformers", "peft": "peft", "accelerate": "accelerate",
            "tokenizers": "tokenizers", "safetensors": "safetensors", "numpy": "numpy", "pyyaml": "yaml",
            "tensorboard": "tensorboard", "bitsandbytes": "bitsandbytes", "datasets": "datasets", "ray": "ray"}
NOISE = ("Loading weights", "it/s]", "s/it]", "kernels-community")  # progress bars and a harmless bnb notice
TAIL_LINES = 25
ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")  # cursor moves of nested progress bars

# Versions of the packages, as the steps' interpreter sees them (the hidden ones look absent); the
# packages steps are skipped without are also imported, since a carried wheel can lack a dependency
# of its own on the lent machine (datasets needs a recent pyarrow, say).
IMPORT_CHECKED = ("bitsandbytes", "datasets", "ray")
PROBE = """
import importlib, importlib.metadata as md, importlib.util as util, json, sys
packages, checked = json.loads(sys.argv[1]), json.loads(sys.argv[2])
found, where, broken = {}, {}, {}
for dist, module in packages.items():
    spec = util.find_spec(module)
    try:
        found[dist] = md.version(dist) if spec is not None else None
    except md.PackageNotFoundError:  # importable without package metadata (a plain folder)
        found[dist] = "(no metadata)"
    where[dist] = spec.origin if spec is not None else None
    if spec is not None and dist in checked:
        try:
            importlib.import_module(module)
        except Exception as err:
            broken[dist] = (type(err).__name__ + ": " + str(err)).splitlines()[0][:200]
print(json.dumps({"python": sys.version.split()[0], "executable": sys.executable, "packages": found,
                  "origins": where, "broken": broken}))
"""


WHEEL_PLATFORM = ["--only-binary=:all:", "--python-version", "3.12", "--implementation", "cp",
                  *[arg for tag in ("manylinux_2_28", "manylinux_2_24", "manylinux_2_17", "manylinux2014")
                    for arg in ("--platform", f"{tag}_x86_64")], "--platform", "any"]


# --------------------------------------------------------------------------- environment


def pinned_versions(requirements: Path = REPO / "requirements.txt") -> dict[str, str]:
    pins = {}
    for line in requirements.read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if "==" in line:
            name, version = line.split("==", 1)
            pins[name.strip().lower()] = version.strip()
    return pins


def version_report(found: dict[str, str | None], pins: dict[str, str], carried: set[str] = frozenset(),
                   broken: dict[str, str] | None = None) -> list[str]:
    """One line per package: its version (marked when it came from --wheels), and a warning where it is
    absent, does not import, or differs from requirements.txt's pin (a build tag such as +cu130 is ignored)."""
    lines = []
    for name in PACKAGES:
        version, pin = found.get(name), pins.get(name)
        if version is None:
            lines.append(f"  {name:<13} absent" + (f"  (requirements.txt pins {pin}; steps that need it are skipped)"
                                                   if pin else ""))
            continue
        shown = f"{version} (carried)" if name in carried else version
        if broken and name in broken:
            lines.append(f"  {name:<13} {shown:<16} WARN: does not import ({broken[name]}); steps that need it "
                         "are skipped")
        elif pin and version.split("+")[0] != pin:
            lines.append(f"  {name:<13} {shown:<16} WARN: requirements.txt pins {pin}")
        else:
            lines.append(f"  {name:<13} {shown}")
    return lines


def call2_wheels(pins: dict[str, str]) -> list[str]:
    """The requirements call 2 carries: its packages at their pins, and what datasets needs besides."""
    return [f"{name}=={pins[name]}" for name in CALL_WHEELS[2]] + list(DATASETS_EXTRA_WHEELS)


def fetch_wheels(folder: Path) -> int:
    """Download call 2's wheels for the lent machine into `folder` (run here, where the registry is reachable)."""
    wanted = call2_wheels(pinned_versions())
    print(f"fetching {', '.join(wanted)} for CPython 3.12 on x86-64 Linux into {folder}", flush=True)
    code = subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                           "--disable-pip-version-check", *WHEEL_PLATFORM, "-d", str(folder), *wanted]).returncode
    files = sorted(folder.glob("*.whl"))
    for path in files:
        print(f"  {path.stat().st_size / 2**20:6.1f} MiB  {path.name}")
    print(f"  {sum(p.stat().st_size for p in files) / 2**20:6.1f} MiB in all (a call carries at most 64 MiB, "
          "the working tree included)")
    return code


def child_env(work: Path, cpu: bool, hide: str) -> dict[str, str]:
    """The steps' environment: offline, this checkout's code first, every cache and temporary file in WORK."""
    env = dict(os.environ)
    paths = ([str(BENCH / "gpu_hide")] if hide else []) + [str(REPO / "src"), str(work / "site")]
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    for sub in ("tmp", "cache", "hf"):
        (work / sub).mkdir(parents=True, exist_ok=True)
    env.update(PYTHONPATH=os.pathsep.join(paths), PYTHONUNBUFFERED="1", TOKENIZERS_PARALLELISM="false",
               HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HF_HOME=str(work / "hf"),
               XDG_CACHE_HOME=str(work / "cache"), TRITON_CACHE_DIR=str(work / "cache/triton"),
               TORCHINDUCTOR_CACHE_DIR=str(work / "cache/inductor"), MPLCONFIGDIR=str(work / "cache/matplotlib"),
               TMPDIR=str(work / "tmp"), RAY_TMPDIR=str(work / "tmp"), GPU_CHECK_HIDE=hide,
               GPU_CHECK_DEVICE="cpu" if cpu else "cuda:0")
    if cpu:
        env["CUDA_VISIBLE_DEVICES"] = ""  # the device checks off, also on a machine that has a GPU
    return env


# --------------------------------------------------------------------------- running


def run_command(argv: list[str], log: Path, limit: float, env: dict, cwd: Path) -> tuple[int | None, float]:
    """(exit code, or None when stopped at the limit; seconds). The whole process group is stopped,
    torchrun's workers included."""
    start = time.monotonic()
    with open(log, "w", encoding="utf-8") as out:
        proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            code: int | None = proc.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            code = None
            _signal_group(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        _signal_group(proc.pid, signal.SIGKILL)  # whatever of the group is left (worker processes)
        proc.wait()
    return code, time.monotonic() - start


def _signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:  # the group has ended
        pass


def show_tail(log: Path) -> None:
    # what a terminal would show of each line: the text after its last carriage return (progress bars)
    text = ANSI_ESCAPE.sub("", log.read_text(encoding="utf-8", errors="replace"))
    shown = [line.rsplit("\r", 1)[-1] for line in text.split("\n")]
    lines = [line for line in shown if line.strip() and not any(n in line for n in NOISE)]
    for line in lines[-TAIL_LINES:]:
        print(f"  | {line}")


@dataclass
class Outcome:
    name: str
    status: str        # PASS, FAIL or SKIP
    seconds: float = 0.0
    limit: float = 0.0
    note: str = ""

    def line(self) -> str:
        timing = f"{self.seconds:4.0f}s of {self.limit:.0f}s" if self.status != "SKIP" else ""
        return f"{self.name:<10} {self.status:<5} {timing:<13} {self.note}".rstrip()


def run_step(step: Step, ctx: Context, env: dict, limit: float) -> Outcome:
    run = step.command(ctx)
    print(f"\n== {step.name} (limit {limit:.0f}s): {step.what}", flush=True)
    log = ctx.work / "logs" / f"{step.name}.log"
    for path in run.fresh:
        shutil.rmtree(path, ignore_errors=True)
    code, seconds = run_command(run.argv, log, limit, env, run.cwd or REPO)
    show_tail(log)
    text = log.read_text(encoding="utf-8", errors="replace")
    problems = ["stopped at its time limit" if code is None else f"exit {code}"] if code != 0 else []
    problems += [f'no "{p}" in its output' for p in run.expect if p not in text]
    problems += [f'"{p}" in its output' for p in run.refuse if p in text]
    if code == 0 and run.verify:
        message = run.verify()
        problems += [message] if message else []
    return Outcome(step.name, "FAIL" if problems else "PASS", seconds, limit, "; ".join(problems))


def install_wheels(wheels: Path, ctx: Context, env: dict, limit: float) -> Outcome:
    """Carried wheels go into WORK/site, which is on the steps' PYTHONPATH ahead of the installed packages."""
    files = sorted(str(p) for p in wheels.glob("*.whl"))
    print(f"\n== wheels (limit {limit:.0f}s): {len(files)} from {wheels}", flush=True)
    argv = [sys.executable, "-m", "pip", "install", "--quiet", "--no-index", "--no-deps", "--no-compile",
            "--disable-pip-version-check", "--upgrade", "--target", str(ctx.work / "site"), *files]
    code, seconds = run_command(argv, ctx.work / "logs" / "wheels.log", limit, env, REPO)
    show_tail(ctx.work / "logs" / "wheels.log")
    note = "" if code == 0 else ("stopped at its time limit" if code is None else f"exit {code}")
    return Outcome("wheels", "FAIL" if note else "PASS", seconds, limit, note)


def probe(env: dict) -> dict:
    result = subprocess.run([sys.executable, "-c", PROBE, json.dumps(PACKAGES), json.dumps(IMPORT_CHECKED)],
                            env=env, capture_output=True, text=True, timeout=60)
    if result.returncode != 0:
        raise RuntimeError(f"the package probe failed: {result.stderr.strip().splitlines()[-1:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])  # a package may print on import


def parse_args(argv: list[str]):
    parser = ArgumentParser(prog="gpu_check.sh", description=__doc__.split("\n\n")[0],
                            epilog=plan_text(), formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("work", nargs="?", help="folder for everything the check builds (default: a new "
                                                "temporary folder)")
    parser.add_argument("--call", type=int, choices=sorted(CALL_WHEELS), help="run only the steps of this device "
                                                                               "call of the two-call plan")
    parser.add_argument("--steps", help="comma-separated steps to run (their prerequisites are added)")
    parser.add_argument("--wheels", help="folder of .whl files to install first (into WORK/site), e.g. bitsandbytes")
    parser.add_argument("--report", help="folder to write report.txt, steps.log and throughput.jsonl to "
                                         "(on the lent machine: $OUT)")
    parser.add_argument("--cpu", action="store_true", help="the same steps on the CPU at toy size, the device "
                                                          "checks off: the dry run")
    parser.add_argument("--fetch-wheels", metavar="DIR", help="download call 2's wheels (bitsandbytes, datasets and "
                                                              "its needs) for the lent machine into DIR; run nothing")
    parser.add_argument("--plan", action="store_true", help="print the steps, their limits and the two calls; "
                                                           "run nothing")
    args = parser.parse_args(argv)
    if args.steps:
        args.steps = [s.strip() for s in args.steps.split(",") if s.strip()]
        unknown = [s for s in args.steps if s not in BY_NAME]
        if unknown or not args.steps:
            parser.error(f"--steps: unknown step {', '.join(unknown) or '(none given)'} "
                         f"(known: {', '.join(BY_NAME)})")
        if args.call:
            parser.error("--steps and --call: give one of them")
    if args.wheels is not None:
        folder = Path(args.wheels)
        if not folder.is_dir():
            parser.error(f"--wheels {args.wheels}: no such folder")
        if not any(folder.glob("*.whl")):
            parser.error(f"--wheels {args.wheels}: no .whl file in it")
    for flag, value in (("WORK", args.work), ("--report", args.report), ("--fetch-wheels", args.fetch_wheels)):
        if value is not None and Path(value).exists() and not Path(value).is_dir():
            parser.error(f"{flag} {value}: exists and is not a folder")
    hidden = [n.strip() for n in os.environ.get("GPU_CHECK_HIDE", "").split(",") if n.strip()]
    unknown = [n for n in hidden if n not in PACKAGES]
    if unknown:
        parser.error(f"GPU_CHECK_HIDE: unknown package {', '.join(unknown)} (known: {', '.join(PACKAGES)})")
    return args


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    if args.plan:
        print(plan_text())
        return 0
    if args.fetch_wheels:
        return fetch_wheels(Path(args.fetch_wheels))
    work = Path(args.work or tempfile.mkdtemp(prefix="masprm-gpu-check-")).resolve()
    (work / "logs").mkdir(parents=True, exist_ok=True)
    hide = ",".join(PACKAGES[n] if n in PACKAGES else n for n in
                    (n.strip() for n in os.environ.get("GPU_CHECK_HIDE", "").split(",")) if n)
    env = child_env(work, args.cpu, hide)
    ctx = Context(work, args.cpu)
    if args.call:
        mode = f"call {args.call} of the two-call plan"
    else:
        mode = "steps " + ",".join(args.steps) if args.steps else "every step"
    header = [f"MASPRM GPU check ({mode}{', --cpu dry run' if args.cpu else ''}) in {work}"]
    print(header[0], flush=True)
    start = time.monotonic()
    factor = CPU_LIMIT_FACTOR if args.cpu else 1
    outcomes = []
    if args.wheels:
        outcomes.append(install_wheels(Path(args.wheels).resolve(), ctx, env, WHEELS_LIMIT_S * factor))
    try:
        found = probe(env)
    except (RuntimeError, subprocess.TimeoutExpired, ValueError) as err:
        print(f"gpu_check: {err}", file=sys.stderr)
        return 1
    broken = found["broken"]
    ctx.have = {name for name, version in found["packages"].items() if version is not None and name not in broken}
    header.append(f"python {found['python']} ({found['executable']})"
                  + (f"; hidden by GPU_CHECK_HIDE: {hide}" if hide else ""))
    site = str(work / "site")
    carried = {name for name, origin in found["origins"].items() if origin and origin.startswith(site)}
    header += version_report(found["packages"], pinned_versions(), carried, broken)
    print("\n".join(header[1:]), flush=True)

    steps = with_prerequisites(selected_steps(args.call, args.steps), ctx.have)
    kept = keep_earlier_rows(work, "cpu" if args.cpu else "cuda")
    if kept:
        print(f"keeping the {kept} throughput rows of an earlier run in {work} that this run does not measure again")
    passed: set[str] = set()
    for step in steps:
        reason = skip_reason(step, ctx.have, passed, broken)
        if reason:
            print(reason, flush=True)
            outcomes.append(Outcome(step.name, "SKIP", note=reason.split(": ", 1)[1]))
            continue
        outcome = run_step(step, ctx, env, step.limit * factor)
        outcomes.append(outcome)
        if outcome.status == "PASS":
            passed.add(step.name)

    budget = sum(o.limit for o in outcomes)
    summary = [f"== summary: {time.monotonic() - start:.0f} s in all (step limits {budget:.0f} s); logs in {work / 'logs'}"]
    summary += [o.line() for o in outcomes]
    rows = latest_rows(read_rows(work))
    (work / ROWS_FILE).write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    rows = [dict(r, setting=f"{r['setting']} (earlier run)") if r.get("earlier") else r for r in rows]
    table = throughput_table(rows, "== throughput" + (" (toy size on the CPU)" if args.cpu else "")) if rows else ""
    print("\n" + "\n".join(summary) + ("\n\n" + table if table else ""))
    if args.report:
        write_report(Path(args.report), header, summary, table, work)
    return 1 if any(o.status == "FAIL" for o in outcomes) else 0


def write_report(folder: Path, header: list[str], summary: list[str], table: str, work: Path) -> None:
    """Three files (the lent machine sends back at most eight): the report, every step's log, the rows."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "report.txt").write_text("\n".join(header + [""] + summary + ["", table]) + "\n", encoding="utf-8")
    with open(folder / "steps.log", "w", encoding="utf-8") as out:
        for log in sorted((work / "logs").glob("*.log"), key=lambda p: p.stat().st_mtime):
            out.write(f"===== {log.stem}\n{log.read_text(encoding='utf-8', errors='replace')}\n")
    if (work / ROWS_FILE).is_file():
        (folder / ROWS_FILE).write_text((work / ROWS_FILE).read_text())


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
