"""``driftwarden demo``: the whole product catching drift, for real, in one command.

* :mod:`driftwarden.demo.scenario` - the realistic event generator and the drift schedule;
* :mod:`driftwarden.demo.producer` - publishes the generated stream to Kafka at a steady pace;
* :mod:`driftwarden.demo.receiver` - a local webhook receiver that verifies signatures;
* :mod:`driftwarden.demo.stack` - Kafka checks, the demo's config and reference, the job process;
* :mod:`driftwarden.demo.outcome` - which injected change was caught, when, and any false alarm;
* :mod:`driftwarden.demo.live` - the rich live view;
* :mod:`driftwarden.demo.runner` - orchestration; :mod:`driftwarden.demo.cli` - the commands.
"""

from driftwarden.core.paths import run_dir

#: The run folder (:func:`driftwarden.core.paths.run_dir`: where scripts/services.sh keeps its state in a
#: checkout); demo runs go to ``RUN_DIR / "demo"``.
RUN_DIR = run_dir()
