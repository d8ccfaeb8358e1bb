"""The `tilescope` entry point.

Each sub-command lives in its own module under `analyzer/commands/` and exposes
`register(app: typer.Typer) -> None`. This module owns only the error-to-exit-code contract of
docs/product.md: 0 ok, 1 gate tripped, 2 bad input/usage, 3 missing component.
"""

from __future__ import annotations

import contextlib
import errno
import importlib
import logging
import os
import sys
from typing import NoReturn

# numpy's OpenBLAS starts one spinning thread per core when numpy is imported; tilescope does no
# linear algebra, and on two cores those threads cost 0.05-0.1 s of CPU on every command (perf:
# `blas_thread_server` 3.7 % of a `kernels` run). Set before anything imports numpy; a user's own
# setting wins.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import typer

from tilescope import interrupt
from tilescope.errors import TilescopeError
from tilescope.scratch import remove_all
from tilescope.text.escape import terminal_text

COMMAND_MODULES = (
    "info", "kernels", "analyze", "rules_cmd", "lint", "collect", "diff", "lines", "serve", "cache",
    "tilescope.agent.command",
)
# command name -> module, so that one command's run imports only its own module (start-up time:
# every module pulls in pandas, rich, plotly or duckdb)
COMMAND_OF = {
    "info": "info",
    "kernels": "kernels",
    "analyze": "analyze",
    "rules": "rules_cmd",
    "rule": "rules_cmd",
    "lint": "lint",
    "collect": "collect",
    "diff": "diff",
    "lines": "lines",
    "serve": "serve",
    "cache": "cache",
    "mcp": "tilescope.agent.command",  # above the commands: the agent's tools call them (docs/internals.md)
}
_registered: set[str] = set()

app = typer.Typer(
    name="tilescope",
    help="Profiling and performance diagnosis for TileLang kernels on Ascend NPUs.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


@app.callback()
def _root(
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks for errors."),
) -> None:
    if debug:
        os.environ["TILESCOPE_DEBUG"] = "1"


def _register_commands(args: list[str]) -> None:
    """Register the command named in `args` only, or every command (root help, unknown names)."""
    first = next((a for a in args if not a.startswith("-")), None)
    wanted = [COMMAND_OF[first]] if first in COMMAND_OF else list(COMMAND_MODULES)
    for name in wanted:
        if name in _registered:
            continue
        module = name if "." in name else f"tilescope.commands.{name}"
        spec = importlib.util.find_spec(module)
        if spec is None:  # a command still being built; the rest of the CLI works
            continue
        importlib.import_module(module).register(app)
        _registered.add(name)


_click_commands: dict[int, typer.core.TyperGroup] = {}


def _click_command() -> typer.core.TyperGroup:
    """The click group typer makes of `app`, made once per set of registered commands. Calling
    `app` makes it anew each time: 18 ms once every command is registered, paid by each run of an
    in-process caller (the quick loop's ~500 runs spent 8 CPU s on it)."""
    key = len(_registered)
    if key not in _click_commands:
        group = typer.main.get_command(app)
        assert isinstance(group, typer.core.TyperGroup)  # app has a callback: typer makes a group
        _click_commands[key] = group
    return _click_commands[key]


def main(argv: list[str] | None = None) -> int:
    """Run one command; exit code per the contract above.

    Called without `argv` (the `tilescope` script, `python -m tilescope.cli`) this is the whole
    process: it then ends with `os._exit` once output is flushed, skipping interpreter teardown
    (freeing every object of a large profile one by one and unloading pandas/DuckDB took ~0.14 s
    of a 1.3 s `analyze`). In-process callers (tests) get the code returned as usual.
    """
    code = _run(argv)
    if argv is None:
        _exit_now(code)
    return code


def _exit_now(code: int) -> NoReturn:
    # os._exit skips the `finally` of threads still running (a timeline read beside a bad kernel
    # table): their scratch directories go here
    remove_all()
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        # a closed pipe or stream: nothing more can be delivered
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code)


def _run(argv: list[str] | None) -> int:
    args = argv if argv is not None else sys.argv[1:]
    debug = bool("--debug" in args or os.environ.get("TILESCOPE_DEBUG"))
    # The whole process (argv None) keeps the handlers to its os._exit: a signal after this
    # returns is recorded, not raised as a traceback. In-process callers get theirs back.
    with interrupt.signals_raise(restore=argv is not None):
        try:
            _register_commands(args)
            returned = _click_command()(args=argv, standalone_mode=False, prog_name="tilescope")
        except BaseException as exc:
            # a signal decides the outcome whatever exception it became on the way (DuckDB turns
            # it into RuntimeError, a reader into a format error): one line, 128 + signal
            signalled = _signalled()
            if signalled is not None:
                return signalled
            if broken_pipe(exc):  # the reader went away: exit 0 quietly, as `cat` does under `| head`
                # deferred: text.terminal (rich) only for terminal output; `tilescope --help` imports every
                #   command module
                from tilescope.text.terminal import reader_gone

                reader_gone()
                return 0
            return _failure_code(exc, debug)
        signalled = _signalled()  # swallowed on the way: the commit refused the output
        if signalled is not None:
            return signalled
    return _returned_code(returned)


def broken_pipe(exc: BaseException) -> bool:
    """True when `exc` says stdout's reader went away (`tilescope info | head`): EPIPE from a write,
    or the SystemExit(1) that rich (Console.on_broken_pipe) and typer's vanilla-click main (on an
    EPIPE it caught) raise for it."""
    if isinstance(exc, OSError):
        return exc.errno == errno.EPIPE
    if isinstance(exc, SystemExit):
        context = exc.__context__
        if isinstance(context, OSError) and context.errno == errno.EPIPE:
            return True
        tb = exc.__traceback__
        while tb is not None and tb.tb_next is not None:
            tb = tb.tb_next
        return tb is not None and tb.tb_frame.f_code.co_name == "on_broken_pipe"
    return False


def _signalled() -> int | None:
    """128 + the signal that interrupted the command, once it has been said; None if none did."""
    signum = interrupt.received()
    return None if signum is None else _interrupted(128 + signum)


def _returned_code(returned: object) -> int:
    """What `app()` returned: in non-standalone mode typer returns the code of a `typer.Exit`
    (and turns KeyboardInterrupt into `Exit(130)`) instead of raising it; a command returns None."""
    if isinstance(returned, int) and not isinstance(returned, bool):
        return _interrupted(130) if returned == 130 else returned
    return 0


def _failure_code(exc: BaseException, debug: bool) -> int:
    """The exit code (and one stderr line) for an exception that ended a command; re-raises bugs."""
    if isinstance(exc, TilescopeError):
        if debug:
            raise exc
        _say(exc.terminal_line())
        return exc.exit_code
    if isinstance(exc, interrupt.Interrupted):  # raised without the handler (a test, a hook)
        return _interrupted(exc.exit_code)
    if isinstance(exc, KeyboardInterrupt | typer.Abort):
        return _interrupted(130)
    if isinstance(exc, typer.Exit):
        return int(exc.exit_code)
    if isinstance(exc, typer.TyperException):
        # typer's own (vendored click) usage errors: unknown command or option, missing argument,
        # bad value; `tilescope` alone raises one that carries the help text
        return _usage_error(exc)
    raise exc


def _interrupted(code: int) -> int:
    _say("tilescope: interrupted")
    return code


def _say(line: str) -> None:
    # stderr may be gone (a closed terminal, a dead pipe): the exit code still tells
    with contextlib.suppress(OSError, ValueError):
        typer.echo(line, err=True)


def _usage_error(exc: typer.TyperException) -> int:
    """Exit 2 with one line (docs/product.md), naming the help of the command that was meant."""
    ctx = getattr(exc, "ctx", None)
    if type(exc).__name__ == "NoArgsIsHelpError":  # no sub-command: typer has printed the help
        return 2
    where = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
    # the message quotes the arguments as typed (a path may hold anything)
    typer.echo(terminal_text(f"tilescope: error: {exc.format_message()}{where}"), err=True)
    return 2


if __name__ == "__main__":
    sys.exit(main())
