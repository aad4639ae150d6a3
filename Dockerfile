# One image for the Flink JobManager/TaskManager, the driftwarden job, the alert worker and the demo:
# Python 3.11 + Java 17 + PyFlink 2.2.1 + driftwarden installed from its wheel (which carries the Kafka
# connector, Flink's Prometheus reporter and our UDF jar). Base images are pinned to exact releases.
# Layers, slowest-changing first: system packages, the Python dependencies (from pyproject.toml alone),
# then the wheel built from the code: a code change rebuilds only the last layers.

# ---- the job's jars: the Kafka connector and the reporter from Maven Central, our UDF built from jobs/java
FROM maven:3.9.9-eclipse-temurin-17 AS jars
WORKDIR /build
COPY scripts/jars/pom.xml scripts/jars/pom.xml
RUN mvn -q -B -f scripts/jars/pom.xml -Pflink dependency:copy-dependencies -DoutputDirectory=/cache/jars/flink \
 && mvn -q -B -f scripts/jars/pom.xml -Pflink-metrics dependency:copy-dependencies \
        -DoutputDirectory=/cache/jars/plugins/metrics-prometheus -DincludeScope=runtime
COPY scripts/udf_hash.sh scripts/udf_hash.sh
COPY jobs/java jobs/java
RUN mvn -q -B -f jobs/java/pom.xml -DskipTests package \
 && mkdir -p /cache/jars/udf && cp jobs/java/target/driftwarden-flink-udf-*.jar /cache/jars/udf/driftwarden-flink-udf.jar \
 && bash scripts/udf_hash.sh jobs/java >/cache/jars/udf/driftwarden-flink-udf.jar.sha

# ---- the wheel (setup.py takes the jars above from DRIFTWARDEN_CACHE_DIR)
FROM python:3.11.11-slim-bookworm AS wheel
WORKDIR /src
COPY --from=jars /cache /cache
COPY . .
RUN DRIFTWARDEN_CACHE_DIR=/cache pip wheel --no-cache-dir --no-deps -w /dist .

# ---- the image for Kubernetes (docker build --target k8s; deploy/k8s/flinkdeployment.yaml): Flink's own image, as
# the Flink Kubernetes Operator runs it, with Python, PyFlink and the wheel
FROM flink:2.2.1-scala_2.12-java17 AS k8s
USER root
RUN apt-get update && apt-get install -y --no-install-recommends python3 python3-pip \
 && rm -rf /var/lib/apt/lists/* && ln -sf /usr/bin/python3 /usr/bin/python
COPY pyproject.toml /tmp/pyproject.toml
RUN python3 -c "import tomllib; print('\n'.join(tomllib.load(open('/tmp/pyproject.toml', 'rb'))['project']['dependencies']))" \
      >/tmp/requirements.txt \
 && pip3 install --no-cache-dir --break-system-packages -r /tmp/requirements.txt && rm /tmp/requirements.txt /tmp/pyproject.toml
COPY --from=wheel /dist /tmp/dist
RUN pip3 install --no-cache-dir --break-system-packages --no-deps /tmp/dist/*.whl && rm -rf /tmp/dist \
 && mkdir -p /opt/flink/plugins/metrics-prometheus \
 && cp "$(python3 -c 'import driftwarden.jobs, os; print(os.path.dirname(driftwarden.jobs.__file__))')"/jars/plugins/metrics-prometheus/*.jar \
       /opt/flink/plugins/metrics-prometheus/
USER flink

# ---- the image (the default target): the docker-compose stack's
FROM python:3.11.11-slim-bookworm
RUN apt-get update && apt-get install -y --no-install-recommends openjdk-17-jre-headless procps curl \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --create-home --home-dir /home/driftwarden --shell /usr/sbin/nologin driftwarden \
 && mkdir -p /opt/driftwarden /var/lib/driftwarden /checkpoints /secrets \
 && chown driftwarden /var/lib/driftwarden /checkpoints /secrets
ENV JAVA_HOME=/usr/lib/jvm/java-17-openjdk-amd64 \
    PYTHONUNBUFFERED=1 \
    DRIFTWARDEN_RUN_DIR=/var/lib/driftwarden \
    FLINK_LOG_DIR=/var/lib/driftwarden/flink-log
# the Python dependencies, pinned in pyproject.toml: this layer changes only with them
COPY pyproject.toml /tmp/pyproject.toml
RUN python -c "import tomllib; print('\n'.join(tomllib.load(open('/tmp/pyproject.toml', 'rb'))['project']['dependencies']))" \
      >/tmp/requirements.txt \
 && pip install --no-cache-dir -r /tmp/requirements.txt && rm /tmp/requirements.txt /tmp/pyproject.toml
# the cluster's class path: PyFlink's lib/ plus flink-python from opt/ (Python UDF operators)
RUN FLINK_HOME=$(python -c 'import os, pyflink; print(os.path.dirname(pyflink.__file__))') \
 && cp "$FLINK_HOME"/opt/flink-python-*.jar "$FLINK_HOME"/lib/ \
 && ln -s "$FLINK_HOME" /opt/flink
# the code: driftwarden's wheel, then the deployment files (Flink's and the demo's config)
COPY --from=wheel /dist /tmp/dist
RUN pip install --no-cache-dir --no-deps /tmp/dist/*.whl && rm -rf /tmp/dist \
 && ln -s "$(python -c 'import driftwarden.jobs, os; print(os.path.dirname(driftwarden.jobs.__file__))')/jars/plugins" \
          /opt/flink-plugins
WORKDIR /opt/driftwarden
COPY deploy deploy
# Flink's Prometheus reporter (deploy/flink/config.yaml) from the jar the wheel carries
ENV PATH=/opt/flink/bin:$PATH FLINK_CONF_DIR=/opt/driftwarden/deploy/flink FLINK_PLUGINS_DIR=/opt/flink-plugins
USER driftwarden
CMD ["driftwarden", "--help"]
