"""Upload a scorer folder to the Hugging Face Hub (stage 3's ``--push_to_hub``, ``masprm-export-scorer``'s).

    push_scorer("checkpoints/MASPRM-GSM8K-1.5B", "me/masprm-gsm8k")

What goes up is what loads: the adapter or model, the tokenizer, the model
card and ``masprm_scorer.json``; the training by-products stay (checkpoints,
event logs, the data cache, ``training_args.bin``, hidden files). The hub client
(``huggingface_hub``) does the work with its own login (``HF_TOKEN`` or
``hf auth login``) and its own offline switch (``HF_HUB_OFFLINE=1``). The
repository is created (private when asked) the first time the commit finds it
missing. The files go up in one commit (``create_commit``), so a given model card
can replace the folder's own README.md in the upload without touching the
folder. A failed upload is a ``HubUploadError`` that says the folder is complete
on disk, so nothing is lost and the push can be repeated.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from masprm.errors import ConfigError, MasprmError, first_line
from masprm.train.card import CARD_FILE

UPLOAD_IGNORE = ["checkpoint-*", "incomplete-checkpoint-*", "runs/*", "map_cache/*", "training_args.bin", ".*", "*/.*"]


class HubUploadError(MasprmError):
    """The upload did not happen (offline, no login, no network, no rights); the folder itself is complete."""


def check_hub_model_id(repo_id: str, setting: str = "hub_model_id") -> str:
    """A repository id the hub accepts ('user/name'); a ConfigError before any work otherwise."""
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    try:
        validate_repo_id(repo_id)
    except HFValidationError as err:
        raise ConfigError(f"{setting} {repo_id!r}: not a hub repository id ({first_line(err)})",
                          setting=setting) from None
    if "/" not in repo_id:
        raise ConfigError(f"{setting} {repo_id!r}: name the owner too, as 'user/name' or 'org/name'",
                          setting=setting)
    return repo_id


def upload_files(folder: str | Path) -> list[str]:
    """The files of ``folder`` an upload sends (relative paths), filtered by the hub client's own rules."""
    from huggingface_hub.utils import filter_repo_objects

    folder = Path(folder)
    every = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())
    return list(filter_repo_objects(every, ignore_patterns=UPLOAD_IGNORE))


def push_scorer(folder: str | Path, repo_id: str, *, private: bool = False, card: str | None = None,
                token: str | None = None, log: Callable[[str], None] = print) -> str:
    """Upload the scorer files of ``folder`` to ``repo_id``; returns the commit's URL.

    ``card`` replaces the folder's README.md in the upload (the folder itself is not changed).
    """
    from huggingface_hub import CommitOperationAdd, HfApi
    from huggingface_hub.errors import HfHubHTTPError, RepositoryNotFoundError

    folder = Path(folder)
    check_hub_model_id(repo_id)
    files = upload_files(folder)
    if card is not None and CARD_FILE not in files:
        files.append(CARD_FILE)
    operations = [CommitOperationAdd(path_in_repo=name, path_or_fileobj=card.encode("utf-8")
                                     if card is not None and name == CARD_FILE else str(folder / name))
                  for name in files]
    log(f"uploading {len(files)} files of {folder} to the hub as {repo_id}: {', '.join(files)}")
    api = HfApi(token=token)
    commit = dict(repo_id=repo_id, operations=operations, commit_message="masprm scorer", repo_type="model")
    try:
        try:
            info = api.create_commit(**commit)
        except RepositoryNotFoundError:
            api.create_repo(repo_id, private=private, repo_type="model", exist_ok=True)
            info = api.create_commit(**commit)
    except (OSError, HfHubHTTPError) as err:
        raise HubUploadError(f"upload of {folder} to the hub as {repo_id} failed: {first_line(err)}; the scorer "
                             f"is complete in {folder}: push it again with masprm-export-scorer {folder} "
                             f"--push_to_hub --hub_model_id {repo_id}", setting="hub_model_id") from None
    url = getattr(info, "commit_url", None) or str(info)
    log(f"pushed {repo_id}: {url}")
    return url
