"""Every code block of README.md runs as written, in document order, against the servers it needs.

A README snippet that no longer works fails CI. The blocks run in a scratch clone
(tests/support/readme.py) with `rocketlite dev` on the README's own ports (9876 / 10911): the
snippets' addresses are not rewritten, so those ports must be free (a clear failure says so).
Each info string has its runner:

- `sh` / `bash`: bash -e with `.venv/bin` first on the PATH (an activated shell). The one line
  `make run` is not run: it would start `rocketlite dev` in the foreground for good; the fixture
  starts that same server instead, before the first block.
- `console`: each `$ command` runs the same way, and its output must equal the lines shown.
- `python`: `.venv/bin/python` with the venv NOT on the PATH, as a user runs a saved script.
- `js`: node with NODE_PATH=.clients/npm/node_modules (ali-ons from `make clients`); without
  the client the block skips, except under CI=true on x86_64, where it fails.
- `properties`: parsed with the servers' loader; every key must be a broker/store key or a
  name-server key, and the values must convert.
- `yaml`: the ACL loader.
- `text`: output shown for reading; it must not look like a command or code.

Any other info string, or none, fails. Blocks whose output the quick start promises are checked
for it (`EXPECTED`). Another test checks that every configuration key the servers accept is named
in the README and that its internal links resolve.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from rocketlite.broker.acl import parse_acl_config
from rocketlite.broker.config import BrokerConfig, broker_config_keys
from rocketlite.config import build_config, parse_properties
from rocketlite.namesrv.config import NamesrvConfig, namesrv_config_keys
from rocketlite.protocol.codes import RequestCode, ResponseCode
from rocketlite.protocol.reserved import DEFAULT_TOPIC
from rocketlite.store.config import StoreConfig, store_config_keys
from tests.support import real_clients
from tests.support.ports import bindable
from tests.support.processes import wait_listening
from tests.support.readme import ROOT, VENV_BIN, Block, Clone, code_blocks, heading_anchors
from tests.support.store import SHARED
from tests.support.topics import wait_until
from tests.support.wire import raw_request

README = ROOT / "README.md"
TEXT = README.read_text(encoding="utf-8")
BLOCKS = code_blocks(TEXT)

# `rocketlite dev` on these, as `make run` starts it; the README's snippets use them as written.
DEV_PORTS = {9876: "name server", 10911: "broker", 10909: "broker VIP channel", 10912: "broker HA"}
BLOCK_TIMEOUT = 150.0

# A block whose text contains the key must print a line matching each pattern.
EXPECTED: dict[str, list[str]] = {
    "printed.get(timeout=30)": [
        r"^sent \w+ to queue \d+$",
        r"^received hello 0 from queue \d+$",
        r"^received hello 1 from queue \d+$",
        r"^received hello 2 from queue \d+$",
    ],
    "-p 'hello from the CLI'": [r"SEND_OK", r"hello from the CLI", r"QuickStart\s+broker-a"],
    "consumerGroup: 'ons-consumer'": [r"^sent SEND_OK", r"^received hello 0$", r"^received hello 2$"],
    'appName("quickstart")': [r"\|\s*hello 0\|", r"\|\s*hello 2\|", r"\bk1\b"],
    '.load("data")': [r"\|\s*QuickStart\|\s*3\|", r"\|\s*Out\|\s*3\|"],
    'instance_name="wrong-keys"': [
        r"^SEND_OK$",
        r"^refused: .*Check signature failed for accessKey=RocketMQ",
    ],
    "haConnections": [r"SEND_OK", r"commitLogMaxOffset\s+[1-9]"],
    "--access-key rocketmq2": [r"create topic to 127\.0\.0\.1:10931 success"],
}

# A `text` block is output or a diagram: none of its lines may start like a command or code.
RUNNABLE_START = re.compile(
    r"^\s*(\$ |>>> |rocketlite |make |python|\.venv/|source |export |import |from \S+ import |const |node )"
)
MAKE_RUN = re.compile(r"^\s*make run\s*(#.*)?$")


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Clone]:
    """A scratch clone with `rocketlite dev` serving on the README's ports, as after `make run`."""
    if not (VENV_BIN / "rocketlite").is_file():
        pytest.fail(
            f"{VENV_BIN.relative_to(ROOT)}/rocketlite is missing: the README's commands need `make install`"
        )
    busy = [f"{port} ({what})" for port, what in DEV_PORTS.items() if not bindable(port)]
    if busy:
        pytest.fail(
            "the README's snippets use the dev server's ports, which are busy: "
            + ", ".join(busy)
            + ". Stop whatever listens there (a `make run`?) and run the test again."
        )
    c = Clone(tmp_path_factory.mktemp("readme") / "rocketlite", SHARED)
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


def test_every_block_has_a_known_info_string() -> None:
    known = {"sh", "bash", "console", "python", "js", "properties", "yaml", "text"}
    bad = [f"line {b.line}: {b.lang or '(none)'}" for b in BLOCKS if b.lang not in known]
    assert not bad, f"README code blocks need one of {sorted(known)} as info string: {bad}"


def test_expected_outputs_name_existing_blocks() -> None:
    """Each EXPECTED key still finds its block, so a rewritten snippet cannot drop its check."""
    for key in EXPECTED:
        assert sum(key in b.code for b in BLOCKS) == 1, (
            f"EXPECTED key {key!r} must match exactly one README block"
        )


def test_internal_links_resolve() -> None:
    anchors = heading_anchors(TEXT)
    links = set(re.findall(r"\]\(#([^)]+)\)", TEXT))
    assert not links - anchors, f"README links to missing headings: {sorted(links - anchors)}"
    for target in re.findall(r"\]\((?!#|https?://)([^)#]+)", TEXT):
        assert (ROOT / target).exists(), f"README links to {target}, which does not exist"


def test_every_config_key_is_documented() -> None:
    keys = broker_config_keys() | store_config_keys() | namesrv_config_keys()
    missing = sorted(k for k in keys if f"`{k}`" not in TEXT)
    assert not missing, f"config keys the servers accept but README.md does not name: {missing}"


@pytest.mark.parametrize("block", BLOCKS, ids=[b.name for b in BLOCKS])
def test_block(block: Block, clone: Clone) -> None:
    runner = {
        "sh": _run_shell,
        "bash": _run_shell,
        "console": _run_console,
        "python": _run_python,
        "js": _run_js,
        "properties": _check_properties,
        "yaml": _check_yaml,
        "text": _check_text,
    }.get(block.lang)
    if runner is None:
        pytest.fail(f"README.md line {block.line}: unknown info string {block.lang!r}")
    output = runner(block, clone)
    for key, patterns in EXPECTED.items():
        if key in block.code:
            for pattern in patterns:
                assert re.search(pattern, output, re.MULTILINE), (
                    f"README.md line {block.line}: expected a line matching {pattern!r} in:\n{output}"
                )


def _ok(block: Block, result_code: int, output: str) -> str:
    assert result_code == 0, (
        f"README.md line {block.line} ({block.lang}) exited {result_code}:\n{block.code}\n---\n{output}"
    )
    return output


def _run_shell(block: Block, clone: Clone) -> str:
    # `make run` starts the dev server in the foreground; the `clone` fixture started it already.
    lines = ["" if MAKE_RUN.match(line) else line for line in block.code.splitlines()]
    script = clone.write(f"block-{block.line}.sh", "\n".join(lines) + "\n")
    result = clone.run(["bash", "-e", str(script)], env=clone.env(venv_on_path=True), timeout=BLOCK_TIMEOUT)
    return _ok(block, result.returncode, result.output)


def _run_console(block: Block, clone: Clone) -> str:
    """`$ command` lines, each followed by its exact output (stdout; stderr is for progress and logs)."""
    steps: list[tuple[str, list[str]]] = []
    for line in block.code.splitlines():
        if line.startswith("$ "):
            steps.append((line[2:], []))
        else:
            assert steps, f"README.md line {block.line}: a console block starts with `$ command`"
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
        assert proc.returncode == 0, (
            f"README.md line {block.line}: `{command}` exited {proc.returncode}:\n{proc.stderr}"
        )
        got = [line.rstrip() for line in proc.stdout.rstrip("\n").splitlines()]
        assert got == [line.rstrip() for line in shown], (
            f"README.md line {block.line}: `{command}` printed something else than the README shows:\n"
            + proc.stdout
        )
        outputs.append(proc.stdout)
    return "".join(outputs)


def _run_python(block: Block, clone: Clone) -> str:
    script = clone.write(f"block-{block.line}.py", block.code)
    python = str(VENV_BIN / "python")
    result = clone.run([python, str(script)], env=clone.env(venv_on_path=False), timeout=BLOCK_TIMEOUT)
    return _ok(block, result.returncode, result.output)


def _run_js(block: Block, clone: Clone) -> str:
    real_clients.require("ons")
    script = clone.write(f"block-{block.line}.js", block.code)
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
            f"README.md line {block.line}: keys no server accepts: "
            f"{sorted(set(props) - broker_keys)} (broker) / {sorted(set(props) - namesrv_keys)} (name server)"
        )
    return ""


def _check_yaml(block: Block, clone: Clone) -> str:
    parse_acl_config(yaml.safe_load(block.code), f"README.md line {block.line}")
    return ""


def _check_text(block: Block, clone: Clone) -> str:
    runnable = [line for line in block.code.splitlines() if RUNNABLE_START.match(line)]
    assert not runnable, (
        f"README.md line {block.line}: a `text` block holds commands or code; give it the info string "
        f"of its language so that it runs: {runnable}"
    )
    return ""


# Lines a server or tool logs when something is wrong: our ERROR level, and grpc's C core writing
# straight to stderr (`E1127 09:10:00.123456  123 add_port.cc:83] ...`).
ERROR_LINE = re.compile(r"(^|\s)(ERROR|CRITICAL)\s|^[EF]\d{4} \d\d:\d\d:\d\d\.\d+ ", re.MULTILINE)


def test_blocks_write_only_into_scratch(clone: Clone) -> None:
    """Run after every block: what the examples saved, logged or stored is under scratch/
    (ignored by git), and the dev server's store is data/; the clone's root is as fresh
    otherwise. Demo stores are removed by the blocks that made them."""
    now = sorted(p.name for p in clone.path.iterdir())
    assert sorted(set(now) - set(clone.fresh)) in ([], ["data"]), f"written into the clone's root: {now}"
    stores = sorted(str(p.parent.relative_to(clone.path)) for p in clone.scratch.rglob("commitlog"))
    assert not stores, f"demo stores left in scratch/: {stores}"


def test_blocks_log_no_errors(clone: Clone) -> None:
    """Run after every block: the servers the examples start beside `make run` (their logs under
    scratch/), `make run`'s own log, and each block's output have no ERROR line and no raw grpc
    line: the examples pick ports of their own."""
    written = [  # the clone's own files, not those behind its links to the checkout
        Path(top, name)
        for top, _dirs, files in os.walk(clone.path)
        for name in files
        if name.endswith(".log")
    ]
    logs = [
        clone.path.parent / "dev.log",
        *written,
        *clone.path.parent.glob("block-*.out"),
    ]
    found = [
        f"{path.name}: {line}"
        for path in logs
        for line in path.read_text(errors="replace").splitlines()
        if ERROR_LINE.search(line)
    ]
    assert not found, "\n".join(found)


def _admin(clone: Clone, *args: str) -> subprocess.CompletedProcess[str]:
    """`rocketlite admin ARGS -n 127.0.0.1:9876` in the clone; fails the test if it fails."""
    done = subprocess.run(
        [str(VENV_BIN / "rocketlite"), "admin", *args, "-n", "127.0.0.1:9876"],
        cwd=clone.path,
        env=clone.env(venv_on_path=True),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, f"rocketlite admin {' '.join(args)}: {done.stderr}"
    return done


def _committed(clone: Clone, group: str, topic: str) -> int:
    """The sum of `group`'s committed offsets over `topic`'s queues (`consumerProgress --json`)."""
    rows = json.loads(_admin(clone, "consumerProgress", "-g", group, "--json").stdout)["queues"]
    return sum(max(r["consumerOffset"], 0) for r in rows if r["topic"] == topic)


def test_the_quick_start_commits_only_what_it_printed(clone: Clone) -> None:
    """Run after the quick start (its group has offsets): with one more message waiting than the
    three it sends, the quick-start script commits exactly the messages it printed. Its listener
    used to queue every message while the script printed three, and `close()` committed the
    fourth, never printed."""
    block = next(b for b in BLOCKS if "printed.get(timeout=30)" in b.code)
    before = _committed(clone, "quickstart-consumer", "QuickStart")
    _admin(clone, "sendMessage", "-t", "QuickStart", "-p", "stray")
    output = _run_python(block, clone)
    printed = re.findall(r"^received (.+) from queue \d+$", output, re.MULTILINE)
    assert len(printed) >= 3, output
    assert _committed(clone, "quickstart-consumer", "QuickStart") - before == len(printed), output
