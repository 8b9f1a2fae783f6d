"""Running the fenced code blocks of README.md and docs/*.md, each by its info string.

tests/test_readme.py and tests/test_docs.py share this: the dev server the blocks talk to (what
`make run` starts, on its own ports, in a scratch clone: `serving_dev`), one runner per info
string (`run_block`), the output checks (`check_expected`) and the checks made after a page's
blocks have run (`written_outside_scratch`, `logged_errors`).

Info strings, and what each block is made to do:

- `sh` / `bash`: bash -e with `.venv/bin` first on the PATH (an activated shell). The one line
  `make run` is not run: it would start `rocketlite dev` in the foreground for good; the fixture
  starts that same server instead, before the first block.
- `console`: each `$ command` runs the same way, and its output must equal the lines shown.
- `python`: `.venv/bin/python` with the venv NOT on the PATH, as a user runs a saved script.
- `js`: node with NODE_PATH=.clients/npm/node_modules (ali-ons from `make clients`); without
  the client the block skips, except under CI=true on x86_64, where it fails.
- `properties`: a configuration fragment, parsed with the servers' loader; every key must be a
  broker/store key or a name-server key, and the values must convert.
- `yaml`: a configuration fragment, loaded by the ACL loader (plain_acl.yml).
- `sql`: one SQL92 filter expression, which must compile.
- `text`: output or a diagram shown for reading; no line may look like a command or code.

Any other info string, or none, fails: no block goes unexecuted silently.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml

from rocketlite.broker.acl import parse_acl_config
from rocketlite.broker.config import BrokerConfig, broker_config_keys
from rocketlite.config import build_config, parse_properties
from rocketlite.filter import compile as compile_filter
from rocketlite.namesrv.config import NamesrvConfig, namesrv_config_keys
from rocketlite.protocol.codes import RequestCode, ResponseCode
from rocketlite.protocol.reserved import DEFAULT_TOPIC
from rocketlite.store.config import StoreConfig, store_config_keys
from tests.support.docs.markdown import ROOT, VENV_BIN, Block, Clone
from tests.support.foreign_clients import real as real_clients
from tests.support.ports import bindable
from tests.support.processes import wait_listening
from tests.support.store import SHARED
from tests.support.topics import wait_until
from tests.support.wire import raw_request

# `rocketlite dev` on these, as `make run` starts it; the snippets use them as written.
DEV_PORTS = {9876: "name server", 10911: "broker", 10909: "broker VIP channel", 10912: "broker HA"}
BLOCK_TIMEOUT = 150.0

# A `text` block is output or a diagram: none of its lines may start like a command or code.
RUNNABLE_START = re.compile(
    r"^\s*(\$ |>>> |rocketlite |make |python|\.venv/|source |export |import |from \S+ import |const |node )"
)
MAKE_RUN = re.compile(r"^\s*make run\s*(#.*)?$")

# Lines a server or tool logs when something is wrong: our ERROR level, and grpc's C core writing
# straight to stderr (`E1127 09:10:00.123456  123 add_port.cc:83] ...`).
ERROR_LINE = re.compile(r"(^|\s)(ERROR|CRITICAL)\s|^[EF]\d{4} \d\d:\d\d:\d\d\.\d+ ", re.MULTILINE)


def where(block: Block) -> str:
    return f"{block.source} line {block.line}"


@contextmanager
def serving_dev(tmp_path_factory: pytest.TempPathFactory, name: str) -> Iterator[Clone]:
    """A scratch clone with `rocketlite dev` serving on the snippets' ports, as after `make run`."""
    if not (VENV_BIN / "rocketlite").is_file():
        pytest.fail(f"{VENV_BIN.relative_to(ROOT)}/rocketlite is missing: the snippets need `make install`")
    busy = [f"{port} ({what})" for port, what in DEV_PORTS.items() if not bindable(port)]
    if busy:
        pytest.fail(
            "the snippets use the dev server's ports, which are busy: "
            + ", ".join(busy)
            + ". Stop whatever listens there (a `make run`?) and run the test again."
        )
    c = Clone(tmp_path_factory.mktemp(name) / "rocketlite", SHARED)
    log = (c.path.parent / "dev.log").open("wb")
    dev = subprocess.Popen(
        [str(VENV_BIN / "rocketlite"), "dev"],  # what `make run` runs, in the clone: store ./data
        cwd=c.path,
        env=c.env(venv_on_path=True),
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    c.groups.append(dev.pid)
    try:
        wait_listening(dev, 9876, "rocketlite dev (name server)")
        wait_listening(dev, 10911, "rocketlite dev (broker)")
        # A user runs the next command once the log says the broker is up: registered, TBW102 routed.
        wait_until(_tbw102_routed, 30, "the dev broker registered with its name server (TBW102 routed)")
        yield c
    finally:
        c.close()
        dev.wait(30)
        log.close()


def _tbw102_routed() -> bool:
    answer = raw_request("127.0.0.1:9876", RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": DEFAULT_TOPIC})
    return answer.code == ResponseCode.SUCCESS


def run_block(block: Block, clone: Clone) -> str:
    """Runs or checks `block` by its info string; fails the test if it fails. Returns its output."""
    runner = RUNNERS.get(block.lang)
    if runner is None:
        pytest.fail(f"{where(block)}: no runner for info string {block.lang!r} (known: {sorted(RUNNERS)})")
    return runner(block, clone)


def check_expected(block: Block, output: str, expected: Mapping[str, list[str]]) -> None:
    """A block whose text contains a key of `expected` must print a line matching each pattern."""
    for key, patterns in expected.items():
        if key in block.code:
            for pattern in patterns:
                assert re.search(pattern, output, re.MULTILINE), (
                    f"{where(block)}: expected a line matching {pattern!r} in:\n{output}"
                )


def _ok(block: Block, result_code: int, output: str) -> str:
    assert result_code == 0, f"{where(block)} ({block.lang}) exited {result_code}:\n{block.code}---\n{output}"
    return output


def _run_shell(block: Block, clone: Clone) -> str:
    # `make run` starts the dev server in the foreground; the fixture started it already.
    lines = ["" if MAKE_RUN.match(line) else line for line in block.code.splitlines()]
    script = clone.write(f"block-{block.slug}.sh", "\n".join(lines) + "\n")
    result = clone.run(["bash", "-e", str(script)], env=clone.env(venv_on_path=True), timeout=BLOCK_TIMEOUT)
    return _ok(block, result.returncode, result.output)


def _run_console(block: Block, clone: Clone) -> str:
    """`$ command` lines, each followed by its exact output (stdout; stderr is for progress and logs)."""
    steps: list[tuple[str, list[str]]] = []
    for line in block.code.splitlines():
        if line.startswith("$ "):
            steps.append((line[2:], []))
        else:
            assert steps, f"{where(block)}: a console block starts with `$ command`"
            steps[-1][1].append(line)
    outputs = []
    for command, shown in steps:
        proc = subprocess.run(
            ["bash", "-ec", command],
            cwd=clone.path,
            env=clone.env(venv_on_path=True),
            capture_output=True,
            text=True,
            timeout=BLOCK_TIMEOUT,
            check=False,
        )
        assert proc.returncode == 0, f"{where(block)}: `{command}` exited {proc.returncode}:\n{proc.stderr}"
        got = [line.rstrip() for line in proc.stdout.rstrip("\n").splitlines()]
        assert got == [line.rstrip() for line in shown], (
            f"{where(block)}: `{command}` printed something else than the page shows:\n" + proc.stdout
        )
        outputs.append(proc.stdout)
    return "".join(outputs)


def run_python(block: Block, clone: Clone) -> str:
    script = clone.write(f"block-{block.slug}.py", block.code)
    python = str(VENV_BIN / "python")
    result = clone.run([python, str(script)], env=clone.env(venv_on_path=False), timeout=BLOCK_TIMEOUT)
    return _ok(block, result.returncode, result.output)


def _run_js(block: Block, clone: Clone) -> str:
    real_clients.require("ons")
    script = clone.write(f"block-{block.slug}.js", block.code)
    env = clone.env(venv_on_path=False)
    env["NODE_PATH"] = str(clone.path / ".clients" / "npm" / "node_modules")
    result = clone.run(["timeout", "90", "node", str(script)], env=env, timeout=BLOCK_TIMEOUT)
    return _ok(block, result.returncode, result.output)


def _check_properties(block: Block, clone: Clone) -> str:
    props = parse_properties(block.code)
    broker_keys = broker_config_keys() | store_config_keys()
    namesrv_keys = namesrv_config_keys()
    if set(props) <= broker_keys:
        build_config(BrokerConfig, props)
        build_config(StoreConfig, props)
    elif set(props) <= namesrv_keys:
        build_config(NamesrvConfig, props)
    else:
        pytest.fail(
            f"{where(block)}: keys no server accepts: "
            f"{sorted(set(props) - broker_keys)} (broker) / {sorted(set(props) - namesrv_keys)} (name server)"
        )
    return ""


def _check_yaml(block: Block, clone: Clone) -> str:
    parse_acl_config(yaml.safe_load(block.code), where(block))
    return ""


def _check_sql(block: Block, clone: Clone) -> str:
    compile_filter(block.code.strip())
    return ""


def _check_text(block: Block, clone: Clone) -> str:
    runnable = [line for line in block.code.splitlines() if RUNNABLE_START.match(line)]
    assert not runnable, (
        f"{where(block)}: a `text` block holds commands or code; give it the info string "
        f"of its language so that it runs: {runnable}"
    )
    return ""


RUNNERS: dict[str, Callable[[Block, Clone], str]] = {
    "sh": _run_shell,
    "bash": _run_shell,
    "console": _run_console,
    "python": run_python,
    "js": _run_js,
    "properties": _check_properties,
    "yaml": _check_yaml,
    "sql": _check_sql,
    "text": _check_text,
}


def unknown_info_strings(blocks: list[Block]) -> list[str]:
    """The blocks no runner knows, as `source line N: lang` (none for a page whose blocks all run)."""
    return [f"{where(b)}: {b.lang or '(none)'}" for b in blocks if b.lang not in RUNNERS]


def written_outside_scratch(clone: Clone) -> list[str]:
    """What the blocks left outside scratch/ (the dev store data/ aside) and demo stores left in it:
    what the examples save, log or store belongs under scratch/ (ignored by git), and the blocks
    that made a demo store remove it."""
    now = sorted(p.name for p in clone.path.iterdir())
    added = sorted(set(now) - set(clone.fresh) - {"data"})
    stores = sorted(p.parent.relative_to(clone.path) for p in clone.scratch.rglob("commitlog"))
    problems = [f"written into the clone's root: {name}" for name in added]
    problems += [f"demo store left in scratch/: {store}" for store in stores]
    return problems


def logged_errors(clone: Clone) -> list[str]:
    """The ERROR and raw grpc lines in the logs of the servers the blocks started beside `make run`
    (under scratch/), in `make run`'s own log and in each block's output: the examples pick ports
    of their own and stop what they start."""
    written = [  # the clone's own files, not those behind its links to the checkout
        Path(top, name)
        for top, _dirs, files in os.walk(clone.path)
        for name in files
        if name.endswith(".log")
    ]
    logs = [clone.path.parent / "dev.log", *written, *clone.path.parent.glob("block-*.out")]
    return [
        f"{path.name}: {line}"
        for path in logs
        for line in path.read_text(errors="replace").splitlines()
        if ERROR_LINE.search(line)
    ]
