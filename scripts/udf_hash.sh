#!/usr/bin/env bash
# The fingerprint of the Java UDF's sources (jobs/java): a jar built from them is stamped with it
# (scripts/bootstrap.sh writes it beside the jar as .sha; setup.py reuses a cached jar only when it matches).
#   scripts/udf_hash.sh [jobs/java folder]
set -euo pipefail
src="${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/jobs/java}"
cat "$src/pom.xml" "$src"/src/main/java/dev/driftwarden/flink/*.java | sha256sum | cut -c1-16
