"""The Kafka secrets of ``driftwarden run``, kept out of the environment that Flink logs and its processes inherit.

``source.security.password_env`` / ``key_password_env`` name variables of the process that connects:

* the embedded job connects from this process's JVM and Python workers (children of it, whose environment
  anyone who can read ``/proc`` sees): :func:`move_env_secrets` writes each secret into a private file,
  ``<run folder>/secrets/<pid>/<VARIABLE>`` (folder 700, file 600, removed when this process ends, or by the
  next start after a crash), and removes the variable from the environment; the job is told the folder
  (``--kafka-secrets``) and reads the files instead (:func:`with_secret_files`);
* a job on a cluster connects from its TaskManagers, whose own environment must hold the variables (how
  Kubernetes and Compose hand secrets to a container); the ``flink run`` client, which logs its whole
  environment, is started without them (:func:`secret_env_names`).

``password_file`` / ``key_password_file`` stay as they are: the job reads the file where it runs.
"""

from __future__ import annotations

import atexit
import os
import shutil
from pathlib import Path

from driftwarden.core.kafka_security import read_secret
from driftwarden.jobs.flink_env import embedded_tmp_dir
from driftwarden.schemas.config import KafkaSecurity, MonitorConfig

#: The secrets a security section can name in the environment: (variable field, file field, what it is).
SECRET_FIELDS = (("password_env", "password_file", "password"),
                 ("key_password_env", "key_password_file", "key_password"))


def secret_env_names(security: KafkaSecurity) -> list[str]:
    """The environment variables that hold the section's secrets."""
    return [getattr(security, env) for env, _, _ in SECRET_FIELDS if getattr(security, env)]


def move_env_secrets(security: KafkaSecurity, run_dir: Path) -> Path | None:
    """Write each secret the section takes from the environment into a private file of this process's
    folder under ``run_dir/secrets`` and remove its variable; return the folder (None: no such secret)."""
    names = secret_env_names(security)
    if not names:
        return None
    root = run_dir / "secrets"
    root.mkdir(parents=True, exist_ok=True)
    root.chmod(0o700)
    folder = embedded_tmp_dir(root)  # root/<pid>; the folders of ended processes are removed
    folder.chmod(0o700)
    atexit.register(shutil.rmtree, folder, ignore_errors=True)  # and this one when this process ends
    for env, file, field in SECRET_FIELDS:
        name = getattr(security, env)
        if name:
            _write_private(folder / name, read_secret(name, None, field))
            os.environ.pop(name, None)
    return folder


def with_secret_files(config: MonitorConfig, folder: Path) -> MonitorConfig:
    """``config`` with each secret it takes from the environment read from ``folder/<VARIABLE>`` instead."""
    security = config.source.security
    update = {}
    for env, file, _ in SECRET_FIELDS:
        if getattr(security, env):
            update.update({env: None, file: str(folder / getattr(security, env))})
    if not update:
        return config
    source = config.source.model_copy(update={"security": security.model_copy(update=update)})
    return config.model_copy(update={"source": source})


def _write_private(path: Path, secret: str) -> None:
    """Write ``secret`` to ``path``, readable by this user only from the start."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as out:
        out.write(secret)
    path.chmod(0o600)
