"""A command run thousands of times without paying its imports each time: a server process,
and `CommandServer`, the tests' side of it.

`python -m tests.command_server MODULE...` imports each MODULE's dependencies (the modules a
`python -m MODULE` process imports, compiled once: this project's venv writes no bytecode),
then answers requests: each runs one command as `python -m MODULE ARGS` does, the module's
code executed as `__main__` with `sys.argv` set, in the request's working folder, stdin from
/dev/null and its file descriptors 1 and 2 on two memory files, and answers with its exit
status and the raw bytes of those two descriptors: what a terminal would show, with whatever
the command's logging, Python's warnings or a traceback put there, not a capture inside the
test's process.

Two ways to run a request:

- `fork`: in a child process forked for it, which exits as the interpreter does (SystemExit's
  status, a traceback and 1 for any other exception, atexit's functions run). A real process
  but for the imports already done; its peak RSS and CPU time come back from wait4. It costs
  a fork of a process of a few hundred MiB (tens of ms).
- inline (the default): in the server itself, which puts back after each command what a
  command changes of a process that a next one would see: the working folder, `sys.argv`,
  `sys.stdout`/`sys.stderr`, the environment, the SIGINT/SIGTERM/SIGALRM handlers, every
  logger's level and handlers (so each command starts with the root logger of a fresh
  process, no handler, and sets its logging up itself), the warning filters and their
  once-only registries; the modules it imported stay, as in a process that imported them.
  A few ms a command.

tests/study/fuzz/test_fidelity.py runs a sample of cases each way and as real `python -m`
processes and asserts the same bytes and status.

Protocol: one JSON object a line on stdin, one answer a line on the stdout the server started
with (its fd 1 then goes to /dev/null, its fd 2 stays where `CommandServer` reads what the
server itself printed). A request: `module`, `argv`, `cwd`, `fork`; optional `stop_at`
("start": `study.run` exits 0 where it would start tracking and Ray, once every check before
its first write has passed; "trial": `trainables` exits 0 where it would build the trial, once
its settings are read), `timeout_s` (SIGALRM ends the command past it: a FIFO waited on) and
`address_space` (bytes a forked child may add to its address space, so a reader that reads
/dev/zero whole fails with MemoryError instead of filling the machine). An answer: `code` (the
exit status; minus the signal for a forked child ended by one; -14 for a timed-out inline one),
`out` and `err` (base64), `maxrss_kib` and `rss_start_kib` (a forked child's peak RSS, from
wait4, and its RSS as it started; 0 inline) and `cpu_s` (the command's CPU time).
"""

from __future__ import annotations

import ast
import atexit
import base64
import contextlib
import gc
import hashlib
import importlib
import importlib.util
import json
import logging
import os
import resource
import shutil
import signal
import stat
import subprocess
import sys
import types
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
HASHED_BYTES = 1 << 20  # files larger than this (a sparse file of GiBs) are compared by stat
CASE_TIMEOUT_S = 60  # a command still running then hangs (a FIFO read, say): SIGALRM ends it

# ---- the server ----

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGALRM)


class _TimedOut(BaseException):
    """An inline command ran past its timeout_s."""


def _alarm(*_args) -> None:
    raise _TimedOut


def _stop(*_args, **_kwargs):
    raise SystemExit(0)


STOPS = {  # where a command is stopped: the attribute its `from X import Y` reads
    "start": ("study.execution", "start_tracking_and_ray"),
    "trial": ("trainables.training.trials", "new_trial"),
}


def _vm(field: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


class Main:
    """MODULE's code, compiled once, run as `python -m MODULE` runs it."""

    def __init__(self, name: str) -> None:
        self.spec = importlib.util.find_spec(name)  # imports its packages, as `python -m` does
        source = self.spec.loader.get_source(name)
        # its dependencies, imported once for every command; the module itself is not
        # imported (in a `python -m` process it is `__main__` alone)
        for dependency in _top_level_imports(source):
            importlib.import_module(dependency)
        self.code = compile(source, self.spec.origin, "exec", dont_inherit=True)

    def __call__(self) -> None:
        module = types.ModuleType("__main__")
        module.__dict__.update(
            __file__=self.spec.origin, __cached__=None, __loader__=self.spec.loader,
            __package__=self.spec.parent, __spec__=self.spec, __builtins__=__builtins__,
        )  # fmt: skip
        sys.argv[0] = self.spec.origin
        exec(self.code, module.__dict__)


def _top_level_imports(source: str) -> list[str]:
    """The absolute modules a module's own statements import (`import x`, `from x import y`)."""
    names: list[str] = []
    for node in ast.parse(source).body:
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
    return [name for name in names if name != "__future__"]


def _status(run) -> int:
    """Run, and the exit status the interpreter would give for how it ended."""
    try:
        run()
        return 0
    except SystemExit as end:
        if end.code is None:
            return 0
        if isinstance(end.code, int):
            return end.code
        print(end.code, file=sys.stderr)
        return 1
    except _TimedOut:
        return -signal.SIGALRM
    except BaseException:
        sys.excepthook(*sys.exc_info())  # the traceback a user would see
        return 1
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):  # a closed stream, as at the interpreter's exit
                stream.flush()


class LoggingState:
    """Every logger's level, handlers, propagation and disabled flag, to put back."""

    def __init__(self) -> None:
        self.root = (logging.root.level, list(logging.root.handlers))
        self.disable = logging.root.manager.disable
        self.loggers = {
            name: (lg, lg.level, lg.handlers, list(lg.handlers), lg.propagate, lg.disabled)
            for name, lg in logging.root.manager.loggerDict.items()
            if isinstance(lg, logging.Logger)
        }

    def restore(self) -> None:
        for name, lg in list(logging.root.manager.loggerDict.items()):
            if not isinstance(lg, logging.Logger):
                continue
            known = self.loggers.get(name)
            if known is None:  # a logger first made by the command: as a new one is
                lg.level, lg.handlers, lg.propagate, lg.disabled = logging.NOTSET, [], True, False
                continue
            _, level, handlers, kept, propagate, disabled = known
            if (lg.level != level or lg.handlers is not handlers or handlers != kept
                    or lg.propagate != propagate or lg.disabled != disabled):  # fmt: skip
                handlers[:] = kept
                lg.level, lg.handlers, lg.propagate, lg.disabled = (
                    level,
                    handlers,
                    propagate,
                    disabled,
                )
        logging.root.handlers = list(self.root[1])
        logging.root.manager.disable = self.disable
        logging.root.setLevel(self.root[0])  # and every logger's cached levels cleared


def _import_stops(names: list[str]) -> None:
    """The modules a stop patches, imported once, before any command runs, as a fresh process
    of the command imports them: what importing sets in the environment stays (importing
    `study` turns MLflow's telemetry off for the process). The real-process cases of
    tests/study/fuzz/test_fidelity.py keep the command's own set-up checked."""
    packages = {name.partition(".")[0] for name in names}
    for module, _ in STOPS.values():  # those of this server's commands' packages
        if module.partition(".")[0] in packages:
            importlib.import_module(module)


class Server:
    def __init__(self, names: list[str]) -> None:
        self.mains = {name: Main(name) for name in names}
        _import_stops(names)
        self.logging = LoggingState()
        self.filters = list(warnings.filters)
        self.environ = dict(os.environ)
        self.handlers = {sig: signal.getsignal(sig) for sig in SIGNALS}
        self.null = os.open(os.devnull, os.O_RDWR)
        self.own_err = os.dup(2)

    def _command(self, request: dict):
        main = self.mains[request["module"]]
        stop = STOPS.get(request.get("stop_at") or "")

        def run() -> None:
            os.chdir(request["cwd"])
            sys.argv = [request["module"], *request["argv"]]
            if stop:
                setattr(importlib.import_module(stop[0]), stop[1], _stop)
            if request.get("timeout_s"):
                signal.alarm(int(request["timeout_s"]))
            main()

        return run, stop

    def _descriptors(self, out_fd: int, err_fd: int) -> None:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(self.null, 0)
        os.dup2(out_fd, 1)
        os.dup2(err_fd, 2)

    def _forked(self, request: dict, out_fd: int, err_fd: int) -> tuple[int, int, int, float]:
        """The child's exit status, its RSS as it started and its peak RSS (KiB: a forked child
        starts with fewer pages than the server holds, the shared libraries' not yet mapped),
        and its CPU time."""
        start_fd = os.memfd_create("rss")
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                os.write(start_fd, str(_vm("VmRSS")).encode())
                self._descriptors(out_fd, err_fd)
                if request.get("address_space"):
                    limit = _vm("VmSize") * 1024 + int(request["address_space"])
                    hard = resource.getrlimit(resource.RLIMIT_AS)[1]
                    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
                signal.signal(signal.SIGALRM, signal.SIG_DFL)  # past timeout_s: ended by it
                run, _ = self._command(request)
                code = _status(run)
                atexit._run_exitfuncs()
                sys.stdout.flush()
                sys.stderr.flush()
            finally:
                os._exit(code & 0xFF)
        _, status, usage = os.wait4(pid, 0)
        start_kib = int(os.pread(start_fd, 64, 0) or 0)
        os.close(start_fd)
        cpu_s = usage.ru_utime + usage.ru_stime
        return os.waitstatus_to_exitcode(status), start_kib, usage.ru_maxrss, cpu_s

    def _inline(self, request: dict, out_fd: int, err_fd: int) -> int:
        cwd, argv, streams = os.getcwd(), sys.argv, (sys.stdout, sys.stderr)
        run, stop = self._command(request)
        original = getattr(importlib.import_module(stop[0]), stop[1]) if stop else None
        signal.signal(signal.SIGALRM, _alarm)
        self._descriptors(out_fd, err_fd)
        try:
            return _status(run)
        finally:
            signal.alarm(0)
            os.dup2(self.null, 1)
            os.dup2(self.own_err, 2)
            if stop:
                setattr(importlib.import_module(stop[0]), stop[1], original)
            os.chdir(cwd)
            sys.argv = argv
            sys.stdout, sys.stderr = streams
            os.environ.clear()
            os.environ.update(self.environ)
            for sig, handler in self.handlers.items():
                signal.signal(sig, handler)
            self.logging.restore()
            warnings.filters[:] = self.filters
            warnings._filters_mutated()  # once-only warnings show again, as in a new process
            gc.unfreeze()  # an entry point freezes what it holds as it returns

    def run(self, request: dict) -> dict:
        out_fd, err_fd = os.memfd_create("out"), os.memfd_create("err")
        if request.get("fork"):
            code, rss, maxrss, cpu_s = self._forked(request, out_fd, err_fd)
        else:
            started = resource.getrusage(resource.RUSAGE_SELF)
            code = self._inline(request, out_fd, err_fd)
            ended = resource.getrusage(resource.RUSAGE_SELF)
            rss = maxrss = 0  # the server's peak is not this command's
            cpu_s = ended.ru_utime + ended.ru_stime - started.ru_utime - started.ru_stime
        captured = []
        for fd in (out_fd, err_fd):
            os.lseek(fd, 0, os.SEEK_SET)
            chunks = []
            while chunk := os.read(fd, 1 << 20):
                chunks.append(chunk)
            os.close(fd)
            captured.append(base64.b64encode(b"".join(chunks)).decode("ascii"))
        return {"code": code, "out": captured[0], "err": captured[1], "maxrss_kib": maxrss,
                "rss_start_kib": rss, "cpu_s": cpu_s}  # fmt: skip


# ---- the tests' side ----


@dataclass(frozen=True)
class Outcome:
    """How one command ended: its exit status (minus the signal that ended it), the raw bytes
    of its fd 1 and fd 2, its peak RSS and the RSS it started with (KiB; a forked command's),
    its CPU time, and what it did to the temporary root (paths created, removed or changed)."""

    code: int
    out: bytes
    err: bytes
    maxrss_kib: int = 0
    rss_at_start_kib: int = 0
    cpu_s: float = 0.0
    written: tuple[str, ...] = ()

    @property
    def added_mib(self) -> float:
        """Memory the command added to what its process held after its imports."""
        return max(0, self.maxrss_kib - self.rss_at_start_kib) / 1024


def snapshot(root: Path) -> dict[str, tuple]:
    """Every path under `root` with what it is: a file's size and sha256 (a file larger than
    HASHED_BYTES by size, inode and modification and change times instead: any write moves
    them), a link's target, a folder, or another kind of file (a FIFO is never opened). Walked
    by file descriptors without recursion: a storage path of two thousand folders is a tree
    deeper than Python's recursion and longer than PATH_MAX."""
    found: dict[str, tuple] = {}
    top = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    stack = [(top, "", iter(sorted(entry.name for entry in os.scandir(top))))]
    try:
        while stack:
            fd, at, names = stack[-1]
            name = next(names, None)
            if name is None:
                os.close(stack.pop()[0])
                continue
            rel = f"{at}/{name}" if at else name
            info = os.stat(name, dir_fd=fd, follow_symlinks=False)
            if stat.S_ISLNK(info.st_mode):
                found[rel] = ("link", os.readlink(name, dir_fd=fd))
            elif stat.S_ISDIR(info.st_mode):
                found[rel] = ("folder",)
                child = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
                stack.append((child, rel, iter(sorted(e.name for e in os.scandir(child)))))
            elif not stat.S_ISREG(info.st_mode):
                found[rel] = ("special", stat.S_IFMT(info.st_mode), info.st_ino)
            elif info.st_size > HASHED_BYTES:
                found[rel] = ("file", info.st_size, info.st_ino, info.st_mtime_ns,
                              info.st_ctime_ns)  # fmt: skip
            else:
                data = os.open(name, os.O_RDONLY | os.O_NOFOLLOW, dir_fd=fd)
                with os.fdopen(data, "rb") as text:
                    found[rel] = ("file", info.st_size, hashlib.sha256(text.read()).hexdigest())
    finally:
        for fd, _, _ in stack:
            os.close(fd)
    return found


def remove_tree(folder: Path) -> None:
    """`folder` and all it holds, however deep (`rm` where Python's recursion would end)."""
    try:
        shutil.rmtree(folder)
    except (OSError, RecursionError):
        subprocess.run(["rm", "-rf", "--", str(folder)], check=True)


def changes(before: dict[str, tuple], after: dict[str, tuple]) -> tuple[str, ...]:
    """The paths created, removed or changed between two snapshots."""
    return tuple(
        f"{what} {path}"
        for path in sorted(before.keys() | after.keys())
        if (what := _change(before.get(path), after.get(path)))
    )


def _change(old: tuple | None, new: tuple | None) -> str:
    if old == new:
        return ""
    return "created" if old is None else "removed" if new is None else "changed"


def command_env(root: Path) -> dict[str, str]:
    """The environment of the commands of a temporary root: this one's, less what would point
    a command at a store of the user's (MLFLOW_*, RAY_*), with HOME and TMPDIR in the root,
    the user's model cache looked up offline, and this checkout importable."""
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("MLFLOW_", "RAY_", "PYTEST_"))}  # fmt: skip
    env.update(
        HOME=str(root / "home"),
        TMPDIR=str(root / "tmp"),
        HF_HOME=os.environ.get("HF_HOME", str(Path.home() / ".cache" / "huggingface")),
        HF_HUB_OFFLINE="1",
        PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
    )
    return env


@dataclass
class CommandServer:
    """A server process with `modules` imported, and the temporary root its commands run in:
    `root/home` is their HOME, `root/tmp` their TMPDIR, `root/cases/N` each command's working
    folder (removed after it). With `fork_every`, every so many commands run forked without
    being asked to."""

    modules: tuple[str, ...]
    root: Path
    fork_every: int | None = None
    cases: int = 0
    process: subprocess.Popen | None = None
    log: Path = field(init=False)
    _ready: dict | None = None

    def __post_init__(self) -> None:
        for name in ("home", "tmp", "cases"):
            (self.root / name).mkdir(parents=True, exist_ok=True)
        self.log = self.root.parent / f"{self.root.name}-server.log"
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "tests.command_server", *self.modules],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, cwd=REPO,
                env=command_env(self.root), text=True, encoding="utf-8",
            )  # fmt: skip

    def _answer(self) -> dict:
        line = self.process.stdout.readline()
        if not line:
            self.process.wait()
            raise RuntimeError(f"the command server ended (exit {self.process.returncode}): "
                               f"{self.log.read_text(errors='replace')[-3000:]}")  # fmt: skip
        return json.loads(line)

    def ready(self) -> dict:
        """The server's first answer, once its imports are done; what those imports printed
        would precede every case's output in a real process, so there must be nothing."""
        if self._ready is None:
            self._ready = self._answer()
            printed = self.log.read_bytes()
            assert not printed, f"importing {self.modules} printed {printed[-2000:]!r}"
        return self._ready

    @contextmanager
    def case_folder(self, files: dict[str, bytes] | None = None) -> Iterator[Path]:
        """A new empty folder under the root's `cases/`, holding `files`; removed after."""
        self.cases += 1
        folder = self.root / "cases" / str(self.cases)
        folder.mkdir()
        for name, data in (files or {}).items():
            (folder / name).write_bytes(data)
        try:
            yield folder
        finally:
            remove_tree(folder)

    def run(
        self,
        module: str,
        argv: list[str],
        cwd: Path,
        *,
        stop_at: str | None = None,
        fork: bool | None = None,
        address_space: int | None = None,
        timeout_s: int = CASE_TIMEOUT_S,
    ) -> Outcome:
        """`python -m MODULE ARGV` in `cwd` (a case folder), in the server or, with `fork`, in
        a child of it (None: every `fork_every`-th command); the root compared before and
        after it."""
        if fork is None:
            fork = bool(self.fork_every) and self.cases % self.fork_every == 0
        assert all("\x00" not in arg for arg in argv), "argv cannot hold a NUL character"
        self.ready()
        before = snapshot(self.root)
        request = {
            "module": module, "argv": list(argv), "cwd": str(cwd), "stop_at": stop_at,
            "fork": fork, "timeout_s": timeout_s, "address_space": address_space,
        }  # fmt: skip
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        answer = self._answer()
        return Outcome(
            code=answer["code"],
            out=base64.b64decode(answer["out"]),
            err=base64.b64decode(answer["err"]),
            maxrss_kib=answer["maxrss_kib"],
            rss_at_start_kib=answer["rss_start_kib"],
            cpu_s=answer["cpu_s"],
            written=changes(before, snapshot(self.root)),
        )

    def command(self, module: str, files: dict[str, bytes], argv: list[str], **options) -> Outcome:
        """`run` in a new case folder holding `files`; `argv` may name them by name."""
        with self.case_folder(files) as folder:
            return self.run(module, argv, folder, **options)

    def close(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.stdin.close()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def serve() -> None:
    """The server's entry point. The protocol keeps the pipes the server started with; fd 1
    goes nowhere, so nothing an import prints can corrupt it, and fd 2 stays where
    CommandServer reads what the server printed."""
    requests = os.fdopen(os.dup(0), "r", encoding="utf-8", errors="surrogatepass")
    answers = os.fdopen(os.dup(1), "w", encoding="utf-8", errors="surrogatepass")
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.close(null)
    server = Server(sys.argv[1:])
    gc.collect()
    gc.freeze()  # a forked child's collections walk none of what the imports made
    answers.write(json.dumps({"ready": True, "rss_kib": _vm("VmRSS")}) + "\n")
    answers.flush()
    for line in requests:
        answers.write(json.dumps(server.run(json.loads(line))) + "\n")
        answers.flush()
    os._exit(0)  # no teardown of what the imports made: seconds, for nothing


if __name__ == "__main__":
    serve()
