"""Every `render` command the documentation shows runs.

README.md and the Markdown files under docs/ show `modelplane-function render` in fenced ```sh and ```bash blocks, either as
`cargo run ... -p modelplane-function -- render ARGS` or as `modelplane-function render ARGS`. Each such command is
run here with the binary under test in place of `cargo run ...`, from the repository root, as a reader on a fresh
clone would run it; a non-zero exit (a missing example path, a FATAL result) fails naming the file and line.
`crossplane render` lines are Crossplane's CLI, not ours, and are left alone.
"""

from __future__ import annotations

import dataclasses
import re
import shlex
import subprocess
from pathlib import Path

import pytest

from conftest import REPO_ROOT, function_binary

DOCUMENTS = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").rglob("*.md"))]
SHELL_FENCE = re.compile(r"^\s*(`{3,}|~{3,})\s*(sh|bash|shell)\b")
FENCE = re.compile(r"^\s*(`{3,}|~{3,})")
PACKAGE = "modelplane-function"


@dataclasses.dataclass(frozen=True)
class Command:
    document: Path
    line: int  # 1-based, the command's first line
    text: str  # as written, continuation lines joined
    args: tuple[str, ...]  # what follows `render`

    @property
    def where(self) -> str:
        return f"{self.document.relative_to(REPO_ROOT)}:{self.line}"


def shell_lines(document: Path) -> list[tuple[int, str]]:
    """The logical lines of every ```sh / ```bash block of `document`: (first line number, text), with lines
    ending in a backslash joined to the next, as the shell reads them."""
    out: list[tuple[int, str]] = []
    fence: str | None = None  # the open fence's marker
    shell = False
    pending: tuple[int, str] | None = None
    for number, line in enumerate(document.read_text().splitlines(), start=1):
        if fence is None:
            opened = FENCE.match(line)
            if opened:
                fence, shell = opened.group(1), bool(SHELL_FENCE.match(line))
            continue
        if line.strip().startswith(fence[0] * len(fence)) and not line.strip().strip(fence[0]):
            fence = None
            if pending is not None:
                out.append(pending)
                pending = None
            continue
        if not shell:
            continue
        start, text = pending if pending is not None else (number, "")
        if line.rstrip().endswith("\\"):
            pending = (start, text + line.rstrip()[:-1] + " ")
        else:
            pending = None
            out.append((start, text + line))
    return out


def render_args(words: list[str]) -> tuple[str, ...] | None:
    """The arguments after `render` when `words` invoke our function's render subcommand, else None."""
    if words and words[0] == "$":
        words = words[1:]
    if not words:
        return None
    if words[0] == "cargo":
        if "run" not in words or "--" not in words:
            return None
        separator = words.index("--")
        cargo_args = words[:separator]
        packages = [b for a, b in zip(cargo_args, cargo_args[1:]) if a in ("-p", "--package")]
        packages += [a.split("=", 1)[1] for a in cargo_args if a.startswith("--package=")]
        rest = words[separator + 1:]
        if PACKAGE in packages and rest[:1] == ["render"]:
            return tuple(rest[1:])
        return None
    if Path(words[0]).name == PACKAGE and words[1:2] == ["render"]:
        return tuple(words[2:])
    return None


def documented_commands() -> list[Command]:
    commands = []
    for document in DOCUMENTS:
        for line, text in shell_lines(document):
            # One command per line here; `;`, `&&` and pipes would need a shell and are not used with render.
            words = shlex.split(text, comments=True)
            args = render_args(words)
            if args is not None:
                commands.append(Command(document, line, " ".join(text.split()), args))
    return commands


COMMANDS = documented_commands()


def test_the_documentation_shows_render_commands():
    """Guards the test below against passing vacuously: the README's quickstart renders an example."""
    assert DOCUMENTS[0].is_file(), "README.md is missing"
    in_readme = [c for c in COMMANDS if c.document == DOCUMENTS[0]]
    assert in_readme, "found no `render` command in a ```sh block of README.md (has the quickstart moved?)"


def test_the_parser_finds_both_spellings(tmp_path: Path):
    """Both spellings, a continued line and a comment are read as the shell reads them; other blocks are not."""
    doc = tmp_path / "doc.md"
    doc.write_text(
        "```sh\n"
        "cargo run -q -p modelplane-function -- render a.yaml \\\n"
        "  --required b   # a comment\n"
        "target/debug/modelplane-function render c.yaml -o json\n"
        "crossplane render xr.yaml composition.yaml functions.yaml\n"
        "cargo run -p modelplane-tests --bin modelplane-package -- check\n"
        "```\n"
        "```\n"
        "modelplane-function render XR.yaml\n"
        "```\n"
    )
    found = [render_args(shlex.split(text, comments=True)) for _, text in shell_lines(doc)]
    assert [f for f in found if f is not None] == [("a.yaml", "--required", "b"), ("c.yaml", "-o", "json")]
    assert [line for line, _ in shell_lines(doc)] == [2, 4, 5, 6]


@pytest.mark.parametrize("command", COMMANDS, ids=[c.where for c in COMMANDS])
def test_documented_render_command_runs(command: Command):
    done = subprocess.run([str(function_binary()), "render", *command.args], capture_output=True, text=True,
                          timeout=120, cwd=REPO_ROOT)
    assert done.returncode == 0, (
        f"{command.where}: `{command.text}` exited {done.returncode}:\n{done.stderr}{done.stdout[-2000:]}"
    )
    assert done.stdout.strip(), f"{command.where}: `{command.text}` printed nothing"
