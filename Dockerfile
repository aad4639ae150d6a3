# One image for the Flink JobManager/TaskManager, the driftwarden job and the demo producer:
# Python 3.11 + Java 17 + PyFlink 2.2.1 + the Kafka connector and our event-time UDF jars.

FROM maven:3.9-eclipse-temurin-17 AS jars
WORKDIR /build
COPY scripts/jars/pom.xml scripts/jars/pom.xml
COPY jobs/java jobs/java
RUN mvn -q -B -f scripts/jars/pom.xml -Pflink dependency:copy-dependencies -DoutputDirectory=/jars/flink \
 && mvn -q -B -f scripts/jars/pom.xml -Pflink-metrics dependency:copy-dependencies \
        -DoutputDirectory=/jars/plugins/metrics-prometheus -DincludeScope=runtime \
 && mvn -q -B -f jobs/java/pom.xml -DskipTests package \
 && mkdir -p /jars/udf && cp jobs/java/target/driftwarden-flink-udf-*.jar /jars/udf/driftwarden-flink-udf.jar

FROM python:3.11-slim-bookworm
RUN apt-get update && apt-get install -y --no-install-recommends openjdk-17-jre-headless procps curl \
 && rm -rf /var/lib/apt/lists/*
ENV JAVA_HOME=/usr/lib/jvm/java-17-openjdk-amd64 \
    DRIFTWARDEN_CACHE_DIR=/opt/driftwarden/cache \
    PYTHONUNBUFFERED=1
WORKDIR /opt/driftwarden/app
COPY pyproject.toml README.md ./
COPY core core
COPY schemas schemas
COPY sketches sketches
COPY pipeline pipeline
COPY jobs jobs
COPY replay replay
COPY latency latency
COPY alerting alerting
COPY driftwarden driftwarden
RUN pip install --no-cache-dir -e .
COPY --from=jars /jars /opt/driftwarden/cache/jars
# the cluster's class path: PyFlink's lib/ plus flink-python from opt/ (Python UDF operators)
RUN FLINK_HOME=$(python -c 'import os, pyflink; print(os.path.dirname(pyflink.__file__))') \
 && cp "$FLINK_HOME"/opt/flink-python-*.jar "$FLINK_HOME"/lib/ \
 && ln -s "$FLINK_HOME" /opt/flink
COPY deploy deploy
# Flink's Prometheus reporter (deploy/flink/config.yaml) from the Maven Central jar fetched above
ENV PATH=/opt/flink/bin:$PATH FLINK_CONF_DIR=/opt/driftwarden/app/deploy/flink \
    FLINK_PLUGINS_DIR=/opt/driftwarden/cache/jars/plugins
CMD ["driftwarden", "--help"]
