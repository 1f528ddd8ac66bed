"""Tracking integrations (``--report_to``) that cannot start, found before the model loads.

transformers starts them only when training begins: wandb without a login in a
run nobody can answer asks on a stdin that is not there and ends in a long
traceback, and mlflow pointed at a server that does not answer retries for
minutes. Each case here is one line naming the fix. Pure Python: nothing is
imported from the integrations themselves.
"""

from __future__ import annotations

import netrc
import os
import sys
from pathlib import Path
from typing import Callable, Sequence

from masprm.checks import connect_problem, url_endpoint
from masprm.errors import ConfigError

PROBE_TIMEOUT_S = 5.0   # a tracking server on the network answers a TCP connection in well under a second
WANDB_QUIET_MODES = ("offline", "disabled", "dryrun")


def _interactive() -> bool:
    return sys.stdin is not None and sys.stdin.isatty()


def _netrc_has(host: str) -> bool:
    path = Path(os.environ.get("NETRC") or Path.home() / ".netrc")
    try:
        return netrc.netrc(str(path)).authenticators(host) is not None
    except (OSError, netrc.NetrcParseError):
        return False


def wandb_problem() -> str | None:
    """wandb needs a key (WANDB_API_KEY or `wandb login`'s netrc entry) unless it runs offline or can ask."""
    if os.environ.get("WANDB_MODE", "").lower() in WANDB_QUIET_MODES or os.environ.get("WANDB_API_KEY"):
        return None
    host = (url_endpoint(os.environ.get("WANDB_BASE_URL") or "https://api.wandb.ai", 443) or ("api.wandb.ai",))[0]
    if _netrc_has(host) or _interactive():
        return None
    return (f"wandb has no login on this machine and this run cannot ask for one: set WANDB_API_KEY (or run "
            f"`wandb login` once), or WANDB_MODE=offline to log locally")


def mlflow_problem() -> str | None:
    """mlflow logs to a local folder unless MLFLOW_TRACKING_URI names a server; that server must answer."""
    uri = os.environ.get("MLFLOW_TRACKING_URI", "")
    if not uri.startswith(("http://", "https://")):
        return None
    endpoint = url_endpoint(uri, 443 if uri.startswith("https://") else 80)
    why = endpoint and connect_problem(*endpoint, PROBE_TIMEOUT_S)
    if not why:
        return None
    return (f"mlflow's server at MLFLOW_TRACKING_URI={uri} does not answer ({why}): start it (`mlflow server "
            f"--host 0.0.0.0 --port {endpoint[1]}`), point MLFLOW_TRACKING_URI at a running one, or unset it to "
            "log to ./mlruns")


PROBLEMS: dict[str, Callable[[], str | None]] = {"wandb": wandb_problem, "mlflow": mlflow_problem}


def check_trackers_start(names: Sequence[str]) -> None:
    """Raise ConfigError (setting report_to) for the first integration in `names` that cannot start."""
    for name in names:
        problem = PROBLEMS.get(name, lambda: None)()
        if problem:
            raise ConfigError(f"report_to {name}: {problem}", setting="report_to")
