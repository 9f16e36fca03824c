"""Record the warm-up corpus: per-iteration times of real runs, quiet and under another CPU load.

    python tools/record_warmup_corpus.py record [--only resnet50-pytorch-test] [--max-minutes 30]
    python tools/record_warmup_corpus.py label      # (re)compute the offline ground truth

Each series is one `tbd profile` run through tbd's own loop with a fixed warm-up long enough to
cover warm-up and stable phase (`--warmup N --iterations 1 --trace-iterations 0`): every warm-up
iteration is device-synchronised and timed, so iterations.json's first N `times_ns` are the whole
series. The loaded variant starts a hog first (one process, one thread: a pure-Python spin loop or
a numpy matmul loop) and stops it after the run; the machine's other users add their own noise,
which is why the 1-minute load average is stored with each series.

Output: tests/fixtures/warmup_corpus/corpus.json (times in integer microseconds). `record` appends
series it does not have yet (an id per model/framework/size/batch/load), so it can be re-run to
resume; `label` rewrites each series' "truth" from bench/warmup_truth.py (docs/warmup.md).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "fixtures" / "warmup_corpus" / "corpus.json"
VENV_PY = ROOT / ".venv" / "bin" / "python"

#: (model, framework, size, batch or None for the model's default, iterations). Test sizes run
#: ~10-100 ms an iteration here; the full-size ones are at batches whose iteration stays < ~1 s.
PLAN = [  # interleaved, so a recording cut by its time budget still covers every framework
    ("resnet50", "pytorch", "test", None, 200),
    ("seq2seq", "pytorch", "test", None, 200),
    ("resnet50", "mxnet", "test", None, 150),
    ("resnet50", "tensorflow", "test", None, 150),
    ("transformer", "pytorch", "test", None, 200),
    # the second pass, after a first ran 16 minutes for 11 series on a machine busy with other
    # developers' runs: 120 iterations each, and --run-timeout drops a workload that is too slow
    # (wgan's test size took > 150 s for 120 iterations on the quiet machine: left out)
    ("seq2seq", "mxnet", "test", None, 120),
    ("a3c", "pytorch", "test", None, 120),
    ("inception3", "mxnet", "test", None, 120),
    ("deepspeech2", "pytorch", "test", None, 120),
    ("wgan", "tensorflow", "test", None, 120),
    ("resnet101", "pytorch", "test", None, 120),
    ("deepspeech2", "mxnet", "test", None, 120),
    ("inception3", "tensorflow", "test", None, 120),
    ("inception3", "pytorch", "test", None, 120),
    ("a3c", "mxnet", "test", None, 120),
    ("transformer", "tensorflow", "test", None, 120),
    ("faster_rcnn", "pytorch", "test", None, 120),
    ("resnet50", "pytorch", "full", 1, 100),
]

#: The other loads: a pure-Python spin (one core of ALU work) and a single-threaded numpy matmul
#: (one core plus cache/memory traffic). Alternated over the plan so both kinds appear.
HOGS = {
    "spin": "while True: pass",
    "matmul": ("import os; os.environ['OMP_NUM_THREADS']='1'\n"
               "import numpy as np\na = np.random.rand(384, 384)\nwhile True: a = (a @ a) / 384.0 + 1e-3"),
}


def series_id(model: str, framework: str, size: str, batch: int | None, load: str) -> str:
    return f"{model}-{framework}-{size}-b{batch if batch is not None else 'default'}-{load}"


def load_corpus() -> dict:
    if CORPUS.exists():
        return json.loads(CORPUS.read_text())
    return {"format": 1, "unit": "us", "series": []}


def save_corpus(corpus: dict) -> None:
    """Compact: one series a line (times as a plain integer list) so diffs stay readable."""
    CORPUS.parent.mkdir(parents=True, exist_ok=True)
    head = {k: v for k, v in corpus.items() if k != "series"}
    lines = [json.dumps(head, separators=(",", ":"))[:-1] + ',"series":[']
    body = [json.dumps(s, separators=(",", ":")) for s in corpus["series"]]
    text = "\n".join(lines) + "\n" + ",\n".join(body) + "\n]}\n"
    tmp = CORPUS.with_suffix(".tmp")
    tmp.write_text(text)
    tmp.replace(CORPUS)


def start_hog(kind: str) -> subprocess.Popen:
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    return subprocess.Popen([str(VENV_PY), "-c", HOGS[kind]], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def snapshot(dest: Path) -> dict[str, str]:
    """tbd as committed (HEAD), laid out as the installed package, and the environment that runs it.

    The working tree is shared with other developers mid-edit (a half-written file broke every run
    of a first attempt), so the workloads run from `git archive HEAD`. PYTHONPATH puts the copy
    ahead of the editable install (whose finder comes after the path), and TBD_PYTHON_<FW> keeps
    the framework venvs of this checkout (frameworks.py would look for them next to the copy).
    """
    src = dest / "src"
    src.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", "HEAD"], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(src)], input=archive, check=True)
    pkg = dest / "pkg" / "tbd"
    shutil.copytree(src / "tbd", pkg)
    for folder in ("profilers", "models", "analysis", "reports"):  # setup.cfg's package_dir
        shutil.copytree(src / folder, pkg / folder)
    env = dict(os.environ, PYTHONPATH=str(dest / "pkg"))
    for fw in ("mxnet", "tensorflow"):
        if (ROOT / f".venv-{fw}" / "bin" / "python").exists():
            env[f"TBD_PYTHON_{fw.upper()}"] = str(ROOT / f".venv-{fw}" / "bin" / "python")
    return env


def run_one(model: str, framework: str, size: str, batch: int | None, n: int, timeout_s: float,
            env: dict[str, str]) -> list[int]:
    """The n synchronised warm-up iterations of one `tbd profile` run, in microseconds."""
    with tempfile.TemporaryDirectory(prefix="tbd-warmup-corpus-") as tmp:
        out = Path(tmp) / "run"
        cmd = [str(VENV_PY), "-c", "import sys; from tbd.cli.main import console_main; sys.exit(console_main())",
               "profile", model, "--framework", framework, "--size", size,
               "--warmup", str(n), "--iterations", "1", "--trace-iterations", "0", "--out", str(out), "--quiet"]
        if batch is not None:
            cmd += ["--batch", str(batch)]
        # Own session: on a timeout the workload child (tbd's runner) goes with the CLI, not on
        # spinning as an orphan that would load every later series.
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=tmp,
                                start_new_session=True)
        try:
            _, err = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise
        if proc.returncode != 0:
            raise RuntimeError(f"exit {proc.returncode}: {err.decode(errors='replace').strip()[-300:]}")
        times_ns = json.loads((out / "iterations.json").read_text())["times_ns"][:n]
    return [int(round(t / 1000)) for t in times_ns]


def _exit_on_sigterm(signum: int, frame: object) -> None:
    # SIGTERM would end the recorder without its `finally`s, leaving a hog spinning behind it (it
    # happened: the first recording's stray hog loaded ten series labelled quiet).
    raise SystemExit(128 + signum)


def record(args: argparse.Namespace) -> None:
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    corpus = load_corpus()
    have = {s["id"] for s in corpus["series"]}
    t_end = time.monotonic() + 60 * args.max_minutes
    snap = Path(tempfile.mkdtemp(prefix="tbd-warmup-snapshot-"))
    try:
        _record(args, corpus, have, t_end, snapshot(snap))
    finally:
        shutil.rmtree(snap, ignore_errors=True)


def _record(args: argparse.Namespace, corpus: dict, have: set[str], t_end: float, env: dict[str, str]) -> None:
    for k, (model, framework, size, batch, n) in enumerate(PLAN):
        hog_kind = "spin" if k % 2 == 0 else "matmul"
        for load in ("none", hog_kind):
            sid = series_id(model, framework, size, batch, load)
            if sid in have or (args.only and not any(sid.startswith(o) for o in args.only)):
                continue
            if time.monotonic() > t_end:
                print("time budget reached; re-run to resume", file=sys.stderr)
                return
            hog = start_hog(load) if load != "none" else None
            try:
                if hog is not None:
                    time.sleep(1.0)  # the hog is running before the workload starts
                load_1m = os.getloadavg()[0]
                t0 = time.monotonic()
                times = run_one(model, framework, size, batch, n, args.run_timeout, env)
            except (subprocess.SubprocessError, OSError, KeyError, ValueError, RuntimeError) as exc:
                print(f"{sid}: failed ({exc})", file=sys.stderr)
                continue
            finally:
                if hog is not None:
                    hog.terminate()
                    hog.wait()
            corpus["series"].append({"id": sid, "model": model, "framework": framework, "size": size,
                                     "batch": batch, "load": load, "loadavg_1m": round(load_1m, 2),
                                     "cores": os.cpu_count(), "times_us": times})
            have.add(sid)
            save_corpus(corpus)
            print(f"{sid}: {len(times)} iterations, median {sorted(times)[len(times) // 2] / 1000:.1f} ms, "
                  f"{time.monotonic() - t0:.0f} s", file=sys.stderr)


def label(args: argparse.Namespace) -> None:
    sys.path.insert(0, str(ROOT / "bench"))  # bench/ is a folder of scripts, not a package
    from warmup_truth import TRUTH_METHOD, true_warmup  # noqa: E402

    corpus = load_corpus()
    corpus["truth_method"] = TRUTH_METHOD
    for s in corpus["series"]:
        s["truth"] = true_warmup(s["times_us"]).to_json()
    save_corpus(corpus)
    print(f"labelled {len(corpus['series'])} series", file=sys.stderr)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    rec = sub.add_parser("record")
    rec.add_argument("--only", nargs="*", help="series id prefixes to record")
    rec.add_argument("--max-minutes", type=float, default=30.0)
    rec.add_argument("--run-timeout", type=float, default=150.0)
    sub.add_parser("label")
    args = parser.parse_args()
    {"record": record, "label": label}[args.command](args)


if __name__ == "__main__":
    main()
