"""Command-line conventions shared by every stage script.

A user error (bad flag value, missing file, malformed config) is reported as
one line on stderr and exit code 2; nothing already written is touched. The
library raises domain errors (``masprm.errors``) that name no flag; ``run_cli``
prefixes the flag of the error's ``setting`` when the script says which it is.
"""

from __future__ import annotations

import argparse
import errno
import io
import math
import os
import re
import sys
from typing import Callable, Mapping, NoReturn

from masprm import __version__, run_config
from masprm.errors import LINE_LIMIT, ConfigError, MasprmError, first_line, no_space_reason
from masprm.log import get_logger, set_verbosity
from masprm.paths import os_problem


log = get_logger(__name__)


class UsageError(MasprmError):
    """An error in the user's command line whose message already names the flag; one line, exit code 2."""


def finite_float(text: str) -> float:
    """A float flag value; inf and nan are refused (they would end up as non-JSON in the outputs)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid float value: {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {text!r}")
    return value


PARSED_FLAGS: dict[str, str] = {}   # filled by ArgumentParser.parse_args: setting (dest) -> flag
PARSED_PATHS: dict[str, str] = {}   # setting -> the text of each parsed value that may name a file or folder


SPELLINGS_NOTE = "Every flag takes both spellings: --lora_r or --lora-r, --n_rollouts or --n-rollouts."


def other_spelling(flag: str) -> str:
    """'--lora-r' -> '--lora_r', '--lora_r' -> '--lora-r' (a flag with neither is itself)."""
    name = flag[2:]
    return "--" + (name.replace("_", "-") if "_" in name else name.replace("-", "_"))


class ArgumentParser(argparse.ArgumentParser):
    """argparse, but a bad flag is one line (`error: ...`) instead of a usage dump.

    Every ``type=float`` flag (also in argument groups, which share the
    registry) accepts finite numbers only, and every command has ``--version``.
    Every long flag answers to both spellings, dashes or underscores (stages
    were written with either; the help shows the declared one, the seed README's).
    """

    def __init__(self, *args, **kwargs):
        kwargs["epilog"] = " ".join(filter(None, (kwargs.get("epilog"), SPELLINGS_NOTE)))
        super().__init__(*args, **kwargs)
        self.register("type", float, finite_float)
        self.add_argument("--version", action="version", version=f"%(prog)s (masprm {__version__})")

    def _declared_spelling(self, token: str) -> str:
        """`token` with its flag in the spelling this parser declares, when only the other one is declared."""
        if not token.startswith("--") or token == "--":
            return token
        flag, eq, value = token.partition("=")
        if flag in self._option_string_actions or other_spelling(flag) not in self._option_string_actions:
            return token
        return other_spelling(flag) + eq + value

    def _verbosity_flags(self) -> dict[str, argparse.Action]:
        """-q/--quiet and -v/--verbose on every command: a stage's own --quiet or --verbose (stage 3's, stage 1's)
        gets the short spelling and sets the level too."""
        found = {}
        for short, long, text in (("-q", "--quiet", "warnings and errors only: no progress lines or bars"),
                                  ("-v", "--verbose", "debug lines too")):
            action = self._option_string_actions.get(long)
            if action is None:
                action = self.add_argument(short, long, dest=f"log_{long[2:]}", action="store_true", help=text)
            elif short not in self._option_string_actions:
                action.option_strings.append(short)
                self._option_string_actions[short] = action
            found[long] = action
        return found

    def _config_flag(self) -> None:
        """``--config FILE`` (``masprm.run_config``) on every command that does not declare its own --config;
        added when the parser is complete (at parse or help time), so a stage's own flag is never shadowed. A
        parser of subcommands leaves it to each subcommand's parser (the file holds one subcommand's settings)."""
        if run_config.FLAG not in self._option_string_actions and self._subparsers is None:
            self.add_argument(run_config.FLAG, dest=run_config.DEST, metavar="FILE", help=run_config.HELP)

    def format_help(self) -> str:
        self._config_flag()
        return super().format_help()

    def parse_known_args(self, args=None, namespace=None):
        verbosity = self._verbosity_flags()
        self._config_flag()
        args = list(sys.argv[1:] if args is None else args)
        end = args.index("--") if "--" in args else len(args)
        args = [self._declared_spelling(token) for token in args[:end]] + args[end:]
        own = self._option_string_actions.get(run_config.FLAG)
        if own is not None and own.dest == run_config.DEST:
            try:   # the file's settings become tokens before the typed ones: a typed flag wins
                args = run_config.with_run_config(self, args)
            except run_config.RunConfigError as err:
                self.error(str(err))
        # Remember each setting's flag (dest -> first spelling), so run_cli can name the flag of
        # a domain error's setting in this script's own spelling.
        PARSED_FLAGS.update({a.dest: a.option_strings[0] for a in self._actions
                             if a.option_strings and a.dest != "help"})
        self._given: set[str] = set()
        parsed, rest = super().parse_known_args(args, namespace)
        self._refuse_flags_that_cannot_act(parsed)
        given = {long: getattr(parsed, a.dest, a.default) != a.default for long, a in verbosity.items()}
        set_verbosity(quiet=given["--quiet"], verbose=given["--verbose"])
        for action in verbosity.values():   # the command's own -q/-v are no setting: nothing downstream sees them
            if action.dest.startswith("log_") and hasattr(parsed, action.dest):
                delattr(parsed, action.dest)
        if getattr(parsed, run_config.DEST, None) is not None:   # only an abbreviation (--conf) gets here
            self.error(f"{run_config.FLAG}: spell the flag out in full (--config FILE or --config=FILE)")
        if hasattr(parsed, run_config.DEST):   # read above; like -q/-v, no setting
            delattr(parsed, run_config.DEST)
        log.debug("%s: %s", self.prog, " ".join(f"{k}={v!r}" for k, v in sorted(vars(parsed).items())))
        # and which value each setting got, so an OSError on a path can be traced back to its flag
        PARSED_PATHS.update({k: os.fspath(v) for k, v in vars(parsed).items()
                             if isinstance(v, (str, os.PathLike)) and os.fspath(v)})
        return parsed, rest

    def _get_values(self, action, arg_strings):   # argparse calls it for each argument on the command line only
        self._given.add(action.dest)
        return super()._get_values(action, arg_strings)

    def _refuse_flags_that_cannot_act(self, parsed: argparse.Namespace) -> None:
        """A flag given while what it needs is not (its ``needs``, ``masprm.config.Needs``) would do nothing:
        one line naming the flag and what it needs, before any work."""
        for action in self._actions:
            needs = getattr(action, "needs", None)
            if needs is not None and action.dest in self._given and not needs.ok(parsed):
                raise ConfigError(needs.problem(action.dest), setting=action.dest)

    def error(self, message: str) -> NoReturn:  # noqa: D401 - argparse API
        self.exit(2, f"{self.prog}: error: {first_line(message, limit=LINE_LIMIT)} (see --help)\n")


def with_flags(text: str, flags: Mapping[str, str] | None = None) -> str:
    """Library text names settings in backquotes (`prm_dir`); show each as this script's flag (--prm_dir).

    A setting the script has no flag for keeps its backquoted name.
    """
    flags = {**COMMON_FLAGS, **PARSED_FLAGS, **(flags or {})}
    return re.sub(r"`(\w+)`", lambda m: flags.get(m.group(1), m.group(0)), text)


def error_line(err: MasprmError, flags: Mapping[str, str] | None = None) -> str:
    """The one line shown for a domain error, naming the flag of its setting when the script has one.

    Backquoted settings in the message become flags (`with_flags`); then a message that starts
    with the setting's name gets the flag in its place, one that starts with the flag or names it
    in parentheses is shown as it is, and any other is prefixed (``--flag: message``).
    """
    setting = err.setting or ""
    flag = (flags or {}).get(setting)
    message = with_flags(first_line(err, limit=LINE_LIMIT), flags)
    if not flag or message.startswith(flag) or f"({flag})" in message:
        return message
    if message.startswith((setting + " ", setting + ":")):   # "epochs must be > 0" -> "--epochs must be > 0"
        return flag + message[len(setting):]
    return f"{flag}: {message}"


# Settings spelled the same way by every stage that has them (the seed README's spellings).
COMMON_FLAGS = {"dataset": "--dataset", "split": "--split", "data_file": "--data_file", "seed": "--seed"}


def _setting_of_path(filename: str, values: Mapping[str, str]) -> str | None:
    """The setting whose value is `filename` or a folder holding it (the longest such value), or None."""
    name = os.path.abspath(filename)
    best = None
    for setting, value in values.items():
        value = os.path.abspath(os.path.expanduser(value))
        if (name == value or name.startswith(value.rstrip(os.sep) + os.sep)) and \
                (best is None or len(value) > len(os.path.abspath(values[best]))):
            best = setting
    return best


# OSErrors about a path the user named (or a file inside a folder the user named): a user's input problem
_PATH_ERRNOS = {errno.ENAMETOOLONG, errno.ELOOP, errno.EACCES, errno.EPERM, errno.ENOTDIR, errno.EISDIR,
                errno.ENOENT, errno.EROFS, errno.ENXIO, errno.ENODEV}


def path_error_line(err: OSError, flags: Mapping[str, str]) -> str | None:
    """One line for an OSError on a path some flag named (``--out_root x/y: it is a loop of symbolic
    links``), or None when no flag's value holds the path."""
    filename = err.filename if isinstance(err.filename, str) else None
    if filename is None or err.errno not in _PATH_ERRNOS:
        return None
    setting = _setting_of_path(filename, PARSED_PATHS)
    if setting is None:
        return None
    flag = flags.get(setting, f"`{setting}`")
    shown = PARSED_PATHS[setting]
    inside = "" if os.path.abspath(filename) == os.path.abspath(shown) else f" ({filename})"
    return f"{flag} {shown}{inside}: {os_problem(err)}"


class _PipeSafeStdout(io.TextIOBase):
    """sys.stdout that survives a reader that went away (``... | head -c 1``): the first BrokenPipeError
    points the descriptor at /dev/null, and the run goes on with its outputs, quietly."""

    def __init__(self, stream):
        self._stream = stream

    def _closed_pipe(self) -> None:
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self._stream.fileno())
            os.close(devnull)
        except (OSError, ValueError, io.UnsupportedOperation):
            pass
        self._stream = open(os.devnull, "w", encoding="utf-8")   # what is still buffered is dropped

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            self._closed_pipe()
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._closed_pipe()

    def fileno(self) -> int:
        return self._stream.fileno()

    def isatty(self) -> bool:
        return self._stream.isatty()

    @property
    def encoding(self):  # noqa: D401 - io API
        return getattr(self._stream, "encoding", "utf-8")

    def writable(self) -> bool:
        return True


def run_cli(main: Callable[[], int | None], flags: Mapping[str, str] | None = None) -> NoReturn:
    """Run a stage's main(), turning a domain or usage error, an OS error on a path a flag named, or a
    full disk, into one clear line + exit 2.

    A setting's flag is the one of the parser the script parsed its arguments with; ``flags``
    (setting -> flag) adds or overrides spellings. A reader of stdout that goes away never stops the work
    (``_PipeSafeStdout``).
    """
    if not isinstance(sys.stdout, _PipeSafeStdout) and sys.stdout is not None:
        sys.stdout = _PipeSafeStdout(sys.stdout)
    prog = sys.argv[0].rsplit("/", 1)[-1] if sys.argv else "masprm"
    try:
        code = main()
    except MasprmError as err:
        print(f"{prog}: error: {error_line(err, {**COMMON_FLAGS, **PARSED_FLAGS, **(flags or {})})}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        sys.exit(130)
    except Exception as err:  # noqa: BLE001 - a full disk and a named path's OSError are answered here; else propagates
        line = path_error_line(err, {**COMMON_FLAGS, **PARSED_FLAGS, **(flags or {})}) \
            if isinstance(err, OSError) else None
        if line is not None:
            print(f"{prog}: error: {line}", file=sys.stderr)
            sys.exit(2)
        reason = no_space_reason(err)
        if reason is None:
            raise
        where = getattr(err, "filename", None) or "an output file"
        print(f"{prog}: error: {where}: cannot be written ({reason}); nothing finished was lost (finished outputs "
              "are written whole, and the same command resumes); free some space and run it again", file=sys.stderr)
        sys.exit(2)
    sys.stdout.flush()
    sys.exit(code or 0)


def check(condition: bool, message: str) -> None:
    """Raise UsageError(message) unless condition holds."""
    if not condition:
        raise UsageError(message)
