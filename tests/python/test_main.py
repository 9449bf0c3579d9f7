"""python -m sparsesync runs the CLI when it can find it and says how to get it when it cannot."""

import os
import stat
import subprocess
import sys


def run(env_extra, *args):
    env = {k: v for k, v in os.environ.items() if k != "SPARSESYNC_CLI"}
    env.update(env_extra)
    return subprocess.run([sys.executable, "-m", "sparsesync", *args], env=env, capture_output=True, text=True)


def test_missing_cli_is_explained(tmp_path):
    r = run({"PATH": str(tmp_path)}, "--version")
    assert r.returncode == 127
    assert "command-line tool was not found" in r.stderr


def test_arguments_and_exit_status_pass_through(tmp_path):
    fake = tmp_path / "sparsesync"
    fake.write_text('#!/bin/sh\necho "args: $*"\nexit 3\n')
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    r = run({"PATH": str(tmp_path) + os.pathsep + os.environ.get("PATH", "")}, "inspect", "p.patch")
    assert r.returncode == 3
    assert r.stdout.strip() == "args: inspect p.patch"
    r = run({"SPARSESYNC_CLI": str(fake)}, "diff")
    assert r.stdout.strip() == "args: diff"
