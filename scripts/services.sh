#!/usr/bin/env bash
# Start, stop and check driftwarden's real services as plain local processes on 127.0.0.1.
#
#   scripts/services.sh start  [kafka|postgres|prometheus|flink|alertmanager|registry ...]   (default: all)
#   scripts/services.sh stop   [...]
#   scripts/services.sh status [...]
#   scripts/services.sh clean     stop every service and remove the data kept outside the run folder (below)
#   scripts/services.sh ports     every port the services listen on at this offset, one "service port" line each
#
# Idempotent: starting a running service does nothing, stopping a stopped one does nothing.
# PID files in .run/pids, logs in .run/logs, data in .run/<service>. Each start waits for
# readiness (a port answering) with a timeout and, on failure, names the service and its log.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
RUN="${DRIFTWARDEN_RUN_DIR:-$REPO/.run}"
CACHE="${DRIFTWARDEN_CACHE_DIR:-$REPO/.cache}"
PIDS="$RUN/pids"
LOGS="$RUN/logs"
VENV="$REPO/.venv"
# DRIFTWARDEN_PORT_OFFSET shifts every port below (a private set of services, with its own
# DRIFTWARDEN_RUN_DIR, beside the default one; tests/conftest.py reads the same offset).
OFFSET="${DRIFTWARDEN_PORT_OFFSET:-0}"
KAFKA_PORT=$((59092 + OFFSET))             # PLAINTEXT
KAFKA_SASL_SSL_PORT=$((59093 + OFFSET))     # SASL_SSL, SCRAM-SHA-512 (user driftwarden)
KAFKA_MTLS_PORT=$((59094 + OFFSET))         # SSL, a client certificate required
KAFKA_CONTROLLER_PORT=$((59095 + OFFSET))   # the KRaft controller
ALERTMANAGER_PORT=$((59096 + OFFSET))       # Alertmanager's API and UI (its cluster listener is off)
AM_RECEIVER_PORT=$((59097 + OFFSET))        # the webhook receiver behind it (records what Alertmanager notifies)
PG_PORT="${DRIFTWARDEN_PG_PORT:-$((55432 + OFFSET))}"  # another port: a private instance (with its own DRIFTWARDEN_RUN_DIR)
PROM_PORT=$((59090 + OFFSET))
FLINK_REST_PORT=$((58081 + OFFSET))
FLINK_RPC_PORT=$((56123 + OFFSET))
FLINK_TASKMANAGERS=2  # one slot each: a job at parallelism 2 runs on both
FLINK_METRICS_PORTS=$((59250 + OFFSET))-$((59250 + FLINK_TASKMANAGERS + OFFSET))  # Flink's Prometheus reporter: the JobManager takes the first, each TaskManager one of the next
REGISTRY_PORT=$((59098 + OFFSET))  # the schema registry (Confluent-compatible API, Avro topics)
READY_TIMEOUT="${DRIFTWARDEN_READY_TIMEOUT:-90}"

flink_metrics_ports() {  # each port of the range FLINK_METRICS_PORTS, one a line
  local port
  for ((port = ${FLINK_METRICS_PORTS%-*}; port <= ${FLINK_METRICS_PORTS#*-}; port++)); do echo "$port"; done
}
print_ports() {  # the table above, for the code that must know every port (bench/fault_harness.service_ports)
  printf '%s %s\n' kafka $KAFKA_PORT kafka-sasl-ssl $KAFKA_SASL_SSL_PORT kafka-mtls $KAFKA_MTLS_PORT \
    kafka-controller $KAFKA_CONTROLLER_PORT alertmanager $ALERTMANAGER_PORT alertmanager-receiver $AM_RECEIVER_PORT \
    registry $REGISTRY_PORT postgres $PG_PORT prometheus $PROM_PORT flink-rest $FLINK_REST_PORT flink-rpc $FLINK_RPC_PORT
  local port
  for port in $(flink_metrics_ports); do echo "flink-metrics $port"; done
}
[[ ${1:-} == ports ]] && { print_ports; exit 0; }  # before anything is made in the run folder

mkdir -p "$PIDS" "$LOGS"

log() { printf '[services] %s\n' "$*" >&2; }
die() { printf '[services] ERROR: %s\n' "$*" >&2; exit 1; }

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# A service already listens on the port: open now and still open a second later. Our ports lie in
# Linux's ephemeral range (32768-60999), so a lone connect can succeed by a TCP self-connection
# while nothing listens (seen once: "kafka already running" with no broker).
already_listening() { port_open "$1" && sleep 1 && port_open "$1"; }

# The process of a PID file when it is still the one this script started: alive, and its command line names this
# run folder. A PID file can outlive its process, and the PID then belong to another program: that one is left alone.
pid_ours() {
  local pid; pid=$(cat "$PIDS/$1.pid" 2>/dev/null) || return 1
  [[ "$pid" =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF "$RUN/"
}

wait_port() { # name port log
  local name=$1 port=$2 logfile=$3 waited=0
  until port_open "$port"; do
    if (( waited >= READY_TIMEOUT )); then
      tail -n 20 "$logfile" >&2 || true
      die "$name did not answer on 127.0.0.1:$port within ${READY_TIMEOUT}s; its log: $logfile"
    fi
    sleep 1; waited=$((waited + 1))
  done
  log "$name ready on 127.0.0.1:$port (${waited}s)"
}

stop_pidfile() { # name
  local name=$1 pid
  pid_ours "$name" || { rm -f "$PIDS/$name.pid"; return 0; }
  pid=$(cat "$PIDS/$name.pid")
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 1 30); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
  kill -9 "$pid" 2>/dev/null || true
  rm -f "$PIDS/$name.pid"
  log "$name stopped"
}

# ---------------------------------------------------------------- kafka
# The broker's TLS material and the SCRAM user's password, made once in $RUN/kafka (docs/kafka-security.md):
#   ca.pem, ca.key           a private CA (clients trust ca.pem)
#   broker.pem               the broker's key (PKCS#8) and certificate, signed by the CA, for IP 127.0.0.1 only
#   client.pem, client.key   a client certificate (CN=driftwarden) and its key, for the mutual-TLS listener
#   client.password          the password of the SCRAM user driftwarden (random, mode 600, no line break)
KAFKA_USER=driftwarden

kafka_tls_material() { # dir
  local dir=$1 tmp
  [[ -s "$dir/ca.pem" && -s "$dir/broker.pem" && -s "$dir/client.pem" && -s "$dir/client.key" ]] && return 0
  command -v openssl >/dev/null || die "openssl is needed to make Kafka's certificates (apt-get install openssl)"
  log "making a private CA, the broker's certificate and a client certificate in $dir"
  tmp=$(mktemp -d "$dir/.tls.XXXXXX")
  (
    set -e
    umask 077
    cd "$tmp"
    openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 3650 -subj "/CN=driftwarden local CA" \
      -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign"
    printf 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' >broker.ext
    printf 'extendedKeyUsage=clientAuth\n' >client.ext
    for who in broker client; do
      openssl req -newkey rsa:2048 -nodes -keyout "$who.key" -out "$who.csr" \
        -subj "/CN=$([[ $who == broker ]] && echo 127.0.0.1 || echo $KAFKA_USER)"
      openssl x509 -req -in "$who.csr" -CA ca.pem -CAkey ca.key -CAcreateserial -out "$who.crt" -days 3650 \
        -extfile "$who.ext"
    done
    cat broker.key broker.crt >broker.pem
    mv client.crt client.pem
    chmod 644 ca.pem client.pem
    mv ca.key broker.pem client.pem client.key "$dir/"
    mv ca.pem "$dir/"  # last: its presence says the set is whole
  ) >>"$LOGS/kafka.log" 2>&1 || { rm -rf "$tmp"; die "could not make Kafka's certificates; its log: $LOGS/kafka.log"; }
  rm -rf "$tmp"
}

kafka_password() { # dir
  local file="$1/client.password"
  [[ -s "$file" ]] && return 0
  (umask 077 && python3 -c 'import secrets, sys; sys.stdout.write(secrets.token_urlsafe(24))' >"$file.tmp" \
    && mv "$file.tmp" "$file") || die "could not write $file"
}

# The SCRAM-SHA-512 credential of $KAFKA_USER, set through the PLAINTEXT listener to the password file's
# (idempotent); the password travels in the file, never on a command line.
kafka_scram_user() { # dir
  [[ -x "$VENV/bin/python" ]] || die "no virtualenv at $VENV to set Kafka's SCRAM user: run scripts/bootstrap.sh"
  "$VENV/bin/python" - "127.0.0.1:$KAFKA_PORT" "$KAFKA_USER" "$1/client.password" >>"$LOGS/kafka.log" 2>&1 <<'PYEOF' \
    || die "could not set the SCRAM credential of $KAFKA_USER; its log: $LOGS/kafka.log"
import sys
from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion
bootstrap, user, password_file = sys.argv[1:]
with open(password_file, "rb") as fh:
    upsert = UserScramCredentialUpsertion(user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), fh.read())
admin = AdminClient({"bootstrap.servers": bootstrap})  # kept until the futures resolve
for future in admin.alter_user_scram_credentials([upsert]).values():
    future.result(timeout=60)
print(f"[services] SCRAM-SHA-512 credential of {user} set")
PYEOF
}

start_kafka() {
  if already_listening $KAFKA_PORT; then log "kafka already running on 127.0.0.1:$KAFKA_PORT"; return; fi
  [[ -d "$CACHE/jars/kafka" ]] || die "Kafka jars missing in $CACHE/jars/kafka: run scripts/bootstrap.sh"
  local dir="$RUN/kafka" cp="$CACHE/jars/kafka/*"
  mkdir -p "$dir/data"
  kafka_tls_material "$dir"
  kafka_password "$dir"
  cat >"$dir/server.properties" <<EOF
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$KAFKA_CONTROLLER_PORT
listeners=PLAINTEXT://127.0.0.1:$KAFKA_PORT,SASL_SSL://127.0.0.1:$KAFKA_SASL_SSL_PORT,SSL://127.0.0.1:$KAFKA_MTLS_PORT,CONTROLLER://127.0.0.1:$KAFKA_CONTROLLER_PORT
advertised.listeners=PLAINTEXT://127.0.0.1:$KAFKA_PORT,SASL_SSL://127.0.0.1:$KAFKA_SASL_SSL_PORT,SSL://127.0.0.1:$KAFKA_MTLS_PORT
controller.listener.names=CONTROLLER
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL,SSL:SSL,CONTROLLER:PLAINTEXT
inter.broker.listener.name=PLAINTEXT
sasl.enabled.mechanisms=SCRAM-SHA-512
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
ssl.keystore.type=PEM
ssl.keystore.location=$dir/broker.pem
ssl.truststore.type=PEM
ssl.truststore.location=$dir/ca.pem
# mutual TLS: the SSL listener requires a client certificate; SASL_SSL takes one when a client offers it
listener.name.ssl.ssl.client.auth=required
listener.name.sasl_ssl.ssl.client.auth=requested
log.dirs=$dir/data
num.partitions=1
auto.create.topics.enable=true
offsets.topic.replication.factor=1
offsets.topic.num.partitions=4
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
log.retention.hours=168
EOF
  cat >"$dir/log4j2.properties" <<'EOF'
rootLogger.level=INFO
rootLogger.appenderRef.stdout.ref=STDOUT
appender.stdout.type=Console
appender.stdout.name=STDOUT
appender.stdout.layout.type=PatternLayout
appender.stdout.layout.pattern=[%d] %p %m (%c)%n
logger.kafka.name=kafka
logger.kafka.level=WARN
logger.apache.name=org.apache.kafka
logger.apache.level=WARN
EOF
  local java_opts=(-Xms256m -Xmx768m -XX:+UseG1GC -Dlog4j2.configurationFile="$dir/log4j2.properties")
  if [[ ! -f "$dir/data/meta.properties" ]]; then
    log "formatting Kafka storage in $dir/data"
    local cluster_id
    cluster_id=$(python3 -c 'import base64, uuid; print(base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("="))')
    java "${java_opts[@]}" -cp "$cp" kafka.tools.StorageTool format --cluster-id="$cluster_id" \
      -c "$dir/server.properties" >>"$LOGS/kafka.log" 2>&1 || die "Kafka storage format failed; its log: $LOGS/kafka.log"
  fi
  nohup java "${java_opts[@]}" -cp "$cp" kafka.Kafka "$dir/server.properties" >>"$LOGS/kafka.log" 2>&1 &
  echo $! >"$PIDS/kafka.pid"
  wait_port kafka $KAFKA_PORT "$LOGS/kafka.log"
  wait_port "kafka SASL_SSL" $KAFKA_SASL_SSL_PORT "$LOGS/kafka.log"
  wait_port "kafka mutual TLS" $KAFKA_MTLS_PORT "$LOGS/kafka.log"
  kafka_scram_user "$dir"
}
stop_kafka() { stop_pidfile kafka; }
status_kafka() {
  port_open $KAFKA_PORT && echo "kafka: up 127.0.0.1:$KAFKA_PORT (SASL_SSL $KAFKA_SASL_SSL_PORT, mutual TLS $KAFKA_MTLS_PORT)" \
    || echo "kafka: down"
}

# ---------------------------------------------------------------- postgres
pg_bin() { ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1; }
as_pg() { if [[ $(id -u) -eq 0 ]]; then (cd / && runuser -u postgres -- "$@"); else "$@"; fi; }

# PostgreSQL refuses to run as root, so as root it runs as the postgres user, which must be able
# to reach its data folder: .run/postgres when it can, else a folder of this checkout in /var/tmp.
pg_dir() {
  if [[ $(id -u) -ne 0 ]] || { id postgres >/dev/null 2>&1 && runuser -u postgres -- test -x "$RUN"; }; then
    echo "$RUN/postgres"
  else
    echo "/var/tmp/driftwarden-postgres-$(printf %s "$RUN" | cksum | cut -d' ' -f1)"
  fi
}

start_postgres() {
  if already_listening $PG_PORT; then log "postgres already running on 127.0.0.1:$PG_PORT"; return; fi
  local bin; bin=$(pg_bin)
  if [[ -z "$bin" ]]; then
    log "installing PostgreSQL from Debian's packages"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
    bin=$(pg_bin)
  fi
  [[ -n "$bin" ]] || die "no PostgreSQL server binaries found under /usr/lib/postgresql"
  if [[ $(id -u) -eq 0 ]] && ! id postgres >/dev/null 2>&1; then useradd --system --home "$RUN/postgres" postgres; fi
  local dir; dir=$(pg_dir)
  mkdir -p "$dir"
  [[ $(id -u) -eq 0 ]] && chown postgres "$dir"
  local password; password=$(pg_password)
  if [[ ! -f "$dir/data/PG_VERSION" ]]; then
    log "initialising PostgreSQL cluster in $dir/data (scram-sha-256; the password is in $(pg_password_file))"
    # initdb runs as the postgres user: it reads the password from a copy it can read, removed after
    local pwfile="$dir/initdb-password"
    (umask 077; printf '%s\n' "$password" >"$pwfile")
    [[ $(id -u) -eq 0 ]] && chown postgres "$pwfile"
    as_pg "$bin/initdb" -D "$dir/data" -U postgres --auth=scram-sha-256 --pwfile="$pwfile" -E UTF8 \
      >"$LOGS/postgres-initdb.log" 2>&1 || { rm -f "$pwfile"; die "initdb failed; its log: $LOGS/postgres-initdb.log"; }
    rm -f "$pwfile"
  elif ! grep -Eq '^(local|host)[[:space:]].*scram-sha-256' "$dir/data/pg_hba.conf"; then
    die "the PostgreSQL cluster in $dir/data lets clients in without a password (initialised with trust); \
re-initialise it (its data is lost): scripts/services.sh stop postgres && rm -rf '$dir/data' && scripts/services.sh start postgres"
  fi
  touch "$dir/postgres.log"; [[ $(id -u) -eq 0 ]] && chown postgres "$dir/postgres.log"
  ln -sfn "$dir/postgres.log" "$LOGS/postgres.log"  # the known log folder points at it
  as_pg "$bin/pg_ctl" -D "$dir/data" -l "$dir/postgres.log" -w -t "$READY_TIMEOUT" \
    -o "-p $PG_PORT -c listen_addresses=127.0.0.1 -k /tmp -c fsync=off -c max_connections=200" start >/dev/null \
    || die "PostgreSQL did not start; its log: $dir/postgres.log"
  head -n 1 "$dir/data/postmaster.pid" >"$PIDS/postgres.pid"
  wait_port postgres $PG_PORT "$dir/postgres.log"
  write_pgpass "$password"
  as_admin psql -tAc "SELECT 1 FROM pg_roles WHERE rolname='driftwarden'" | grep -q 1 \
    || printf "CREATE ROLE driftwarden LOGIN SUPERUSER PASSWORD '%s';\n" "$password" | as_admin psql -q -f -
  as_admin psql -tAc "SELECT 1 FROM pg_database WHERE datname='driftwarden'" | grep -q 1 \
    || as_admin psql -qc "CREATE DATABASE driftwarden OWNER driftwarden"
}

# The password of the roles postgres and driftwarden, generated once (URL-safe characters) into a file of
# mode 600; tests/conftest.py builds its store URL from it. It never goes on a command line.
pg_password_file() { echo "$RUN/postgres/password"; }
pg_password() {
  local file; file=$(pg_password_file)
  if [[ ! -s "$file" ]]; then
    mkdir -p "$(dirname "$file")"
    (umask 077; python3 -c 'import secrets; print(secrets.token_urlsafe(24))' >"$file")
  fi
  chmod 600 "$file"
  head -n 1 "$file"
}
# libpq's password file for this server (mode 600): the admin commands below, and any client named to it
# (PGPASSFILE, or ?passfile= in a store URL, as a cluster's TaskManagers are)
write_pgpass() {
  (umask 077; printf '127.0.0.1:%s:*:*:%s\nlocalhost:%s:*:*:%s\n' "$PG_PORT" "$1" "$PG_PORT" "$1" >"$RUN/postgres/pgpass")
}
as_admin() { PGPASSFILE="$RUN/postgres/pgpass" "$@" -h 127.0.0.1 -p "$PG_PORT" -U postgres -d postgres; }
stop_postgres() {
  local bin dir; bin=$(pg_bin); dir=$(pg_dir)
  if [[ -n "$bin" && -f "$dir/data/postmaster.pid" ]]; then
    as_pg "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null 2>&1 || true
    log "postgres stopped"
  fi
  rm -f "$PIDS/postgres.pid"
}
status_postgres() { port_open $PG_PORT && echo "postgres: up 127.0.0.1:$PG_PORT" || echo "postgres: down"; }
# The data kept outside the run folder (pg_dir in /var/tmp, as root when the postgres user cannot reach the run
# folder): removed after its server stopped. The run folder itself is the caller's to remove (make clean does).
clean_postgres() {
  local dir; dir=$(pg_dir)
  if [[ "$dir" == /var/tmp/driftwarden-postgres-* && -d "$dir" ]]; then
    rm -rf "$dir"
    log "removed PostgreSQL's folder $dir"
  fi
}

# ---------------------------------------------------------------- prometheus
start_prometheus() {
  if already_listening $PROM_PORT; then log "prometheus already running on 127.0.0.1:$PROM_PORT"; return; fi
  if ! command -v prometheus >/dev/null; then
    log "installing Prometheus from Debian's packages"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq prometheus >/dev/null
  fi
  local dir="$RUN/prometheus"
  mkdir -p "$dir/data" "$dir/targets"
  sed -e "s#@TARGETS@#$dir/targets#" -e "s#@RULES@#$REPO/deploy/prometheus/*.rules.yml#" \
    "$REPO/scripts/prometheus.yml" >"$dir/prometheus.yml"
  nohup prometheus --config.file="$dir/prometheus.yml" --storage.tsdb.path="$dir/data" \
    --web.listen-address=127.0.0.1:$PROM_PORT --web.enable-lifecycle >>"$LOGS/prometheus.log" 2>&1 &
  echo $! >"$PIDS/prometheus.pid"
  wait_port prometheus $PROM_PORT "$LOGS/prometheus.log"
}
stop_prometheus() { stop_pidfile prometheus; }
status_prometheus() { port_open $PROM_PORT && echo "prometheus: up 127.0.0.1:$PROM_PORT" || echo "prometheus: down"; }

# ---------------------------------------------------------------- flink (standalone cluster)
flink_home() { "$VENV/bin/python" -c 'import os, pyflink; print(os.path.dirname(pyflink.__file__))'; }

start_flink() {
  if already_listening $FLINK_REST_PORT; then log "flink already running on 127.0.0.1:$FLINK_REST_PORT"; return; fi
  [[ -x "$VENV/bin/python" ]] || die "no virtualenv at $VENV: run scripts/bootstrap.sh"
  local home conf="$RUN/flink/conf"; home=$(flink_home)
  # the JVMs' temporary folder (java.io.tmpdir, io.tmp.dirs): what an earlier cluster unpacked there (Flink's RPC and
  # planner jars, 65 MiB a start) and left goes before this one starts
  rm -rf "$RUN/flink/tmp"
  mkdir -p "$conf" "$RUN/flink/log" "$RUN/flink/tmp" "$RUN/flink/lib"
  # the cluster's class path: PyFlink's lib/ plus flink-python from opt/ (Python UDF operators)
  ln -sf "$home"/lib/*.jar "$home"/opt/flink-python-*.jar "$RUN/flink/lib/"
  cp "$home/conf/"log4j*.properties "$home/conf/"logback*.xml "$conf/"
  # exceptions logged without loading classes: a finished job's threads log through its closed class loader
  PYTHONPATH="$REPO" "$VENV/bin/python" -c 'import sys; from pathlib import Path; from driftwarden.jobs.flink_env import log4j_plain_throwables as plain
for name in sys.argv[1:]: plain(Path(name), Path(name))' "$conf/"log4j*.properties || die "could not write Flink's log configuration in $conf"
  sed -e "s#@RUN@#$RUN/flink#g" -e "s#@PYTHON@#$VENV/bin/python#g" \
      -e "s#@REST_PORT@#$FLINK_REST_PORT#g" -e "s#@RPC_PORT@#$FLINK_RPC_PORT#g" \
      -e "s#@METRICS_PORTS@#$FLINK_METRICS_PORTS#g" "$REPO/jobs/flink-conf.yaml" >"$conf/config.yaml"
  [[ -d "$CACHE/jars/plugins/metrics-prometheus" ]] || die "Flink's Prometheus reporter missing in $CACHE/jars/plugins: run scripts/bootstrap.sh"
  export FLINK_CONF_DIR="$conf" FLINK_LOG_DIR="$RUN/flink/log" FLINK_PID_DIR="$PIDS" FLINK_LIB_DIR="$RUN/flink/lib" \
    FLINK_PLUGINS_DIR="$CACHE/jars/plugins"
  "$home/bin/jobmanager.sh" start >>"$LOGS/flink.log" 2>&1 || die "Flink JobManager did not start; logs: $RUN/flink/log"
  local tm
  for ((tm = 1; tm <= FLINK_TASKMANAGERS; tm++)); do  # each a process of its own, with its own log
    "$home/bin/taskmanager.sh" start >>"$LOGS/flink.log" 2>&1 || die "Flink TaskManager $tm did not start; logs: $RUN/flink/log"
  done
  wait_port flink $FLINK_REST_PORT "$LOGS/flink.log"
  local waited=0
  until (( $(curl -fsS "http://127.0.0.1:$FLINK_REST_PORT/taskmanagers" 2>/dev/null | grep -o '"id"' | wc -l) >= FLINK_TASKMANAGERS )); do
    (( waited >= READY_TIMEOUT )) && die "fewer than $FLINK_TASKMANAGERS Flink TaskManagers registered within ${READY_TIMEOUT}s; logs: $RUN/flink/log"
    sleep 1; waited=$((waited + 1))
  done
  log "flink: $FLINK_TASKMANAGERS TaskManagers registered"
  register_flink_targets
}

# the cluster's two reporter endpoints, as file_sd targets of the local Prometheus
register_flink_targets() {
  local targets="" port
  mkdir -p "$RUN/prometheus/targets"
  for port in $(flink_metrics_ports); do targets+="${targets:+, }\"127.0.0.1:$port\""; done
  echo "[{\"targets\": [$targets], \"labels\": {\"source\": \"flink-cluster\"}}]" >"$RUN/prometheus/targets/flink-cluster.json"
}
stop_flink() {
  port_open $FLINK_REST_PORT || ls "$PIDS"/flink-*.pid >/dev/null 2>&1 || return 0
  local home; home=$(flink_home)
  export FLINK_CONF_DIR="$RUN/flink/conf" FLINK_LOG_DIR="$RUN/flink/log" FLINK_PID_DIR="$PIDS" FLINK_LIB_DIR="$RUN/flink/lib"
  "$home/bin/taskmanager.sh" stop-all >>"$LOGS/flink.log" 2>&1 || true
  "$home/bin/jobmanager.sh" stop-all >>"$LOGS/flink.log" 2>&1 || true
  rm -f "$RUN/prometheus/targets/flink-cluster.json"
  log "flink stopped"
}
status_flink() { port_open $FLINK_REST_PORT && echo "flink: up 127.0.0.1:$FLINK_REST_PORT" || echo "flink: down"; }

# ---------------------------------------------------------------- alertmanager
# Debian's prometheus-alertmanager with deploy/alertmanager/alertmanager.yml (@RECEIVER@: the recording webhook
# receiver below, driftwarden.alerting.testing, which appends every notification to $RUN/alertmanager/received.jsonl).
# Silences and the notification log persist in $RUN/alertmanager/data; alerts are re-sent by their clients.
start_alertmanager() {
  local dir="$RUN/alertmanager"
  mkdir -p "$dir/data"
  if ! pid_ours alertmanager-receiver; then
    [[ -x "$VENV/bin/python" ]] || die "no virtualenv at $VENV for Alertmanager's receiver: run scripts/bootstrap.sh"
    nohup "$VENV/bin/python" -m driftwarden.alerting.testing --port "$AM_RECEIVER_PORT" --record "$dir/received.jsonl" \
      >>"$LOGS/alertmanager-receiver.log" 2>&1 &
    echo $! >"$PIDS/alertmanager-receiver.pid"
    wait_port "receiver for Alertmanager (am-receiver)" "$AM_RECEIVER_PORT" "$LOGS/alertmanager-receiver.log"
  fi
  if already_listening $ALERTMANAGER_PORT; then log "alertmanager already running on 127.0.0.1:$ALERTMANAGER_PORT"; return; fi
  if ! command -v prometheus-alertmanager >/dev/null; then
    log "installing Alertmanager from Debian's packages"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq prometheus-alertmanager >/dev/null
  fi
  sed -e "s#@RECEIVER@#http://127.0.0.1:$AM_RECEIVER_PORT/alertmanager#" "$REPO/deploy/alertmanager/alertmanager.yml" \
    >"$dir/alertmanager.yml"
  nohup prometheus-alertmanager --config.file="$dir/alertmanager.yml" --storage.path="$dir/data" \
    --web.listen-address=127.0.0.1:$ALERTMANAGER_PORT --cluster.listen-address= \
    >>"$LOGS/alertmanager.log" 2>&1 &
  echo $! >"$PIDS/alertmanager.pid"
  wait_port alertmanager $ALERTMANAGER_PORT "$LOGS/alertmanager.log"
}
stop_alertmanager() { stop_pidfile alertmanager; stop_pidfile alertmanager-receiver; }
status_alertmanager() {
  port_open $ALERTMANAGER_PORT && echo "alertmanager: up 127.0.0.1:$ALERTMANAGER_PORT (receiver $AM_RECEIVER_PORT)" \
    || echo "alertmanager: down"
}

# ---------------------------------------------------------------- registry (schema registry, Confluent API)
# scripts/schema_registry.py: basic auth as user driftwarden, the password in $RUN/registry/password
start_registry() {
  if already_listening $REGISTRY_PORT; then log "registry already running on 127.0.0.1:$REGISTRY_PORT"; return; fi
  [[ -x "$VENV/bin/python" ]] || die "no virtualenv at $VENV: run scripts/bootstrap.sh"
  mkdir -p "$RUN/registry"
  nohup "$VENV/bin/python" "$REPO/scripts/schema_registry.py" --port $REGISTRY_PORT --dir "$RUN/registry" \
    >>"$LOGS/registry.log" 2>&1 &
  echo $! >"$PIDS/registry.pid"
  wait_port registry $REGISTRY_PORT "$LOGS/registry.log"
}
stop_registry() { stop_pidfile registry; }
status_registry() { port_open $REGISTRY_PORT && echo "registry: up 127.0.0.1:$REGISTRY_PORT" || echo "registry: down"; }

# ---------------------------------------------------------------- main
ALL=(kafka postgres prometheus flink alertmanager registry)
stop_each() { local i; for ((i = $#; i >= 1; i--)); do "stop_${!i}"; done; }  # in the reverse order of their start
cmd=${1:-}; shift || true
services=("$@"); [[ ${#services[@]} -eq 0 ]] && services=("${ALL[@]}")
for s in "${services[@]}"; do
  [[ " ${ALL[*]} " == *" $s "* ]] || die "unknown service '$s' (valid: ${ALL[*]})"
done
case "$cmd" in
  start) for s in "${services[@]}"; do "start_$s"; done ;;
  stop) stop_each "${services[@]}" ;;
  status) for s in "${services[@]}"; do "status_$s"; done ;;
  clean) stop_each "${ALL[@]}"; clean_postgres ;;
  *) die "usage: scripts/services.sh start|stop|status [${ALL[*]}] | clean | ports" ;;
esac
