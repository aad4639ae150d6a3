# driftwarden: two commands do everything on a fresh machine.
#   make demo   - set up, start the local stack, and run the live drift demo
#   make test   - set up, start every real service, and run the whole test suite
# Both are safe to run twice. `make stop` stops every service the scripts started.

SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
PYTEST_ARGS ?=
BENCH_ARGS ?=
# the local stack's Kafka (scripts/services.sh, shifted by DRIFTWARDEN_PORT_OFFSET): driftwarden's own default is localhost:9092
KAFKA := 127.0.0.1:$(shell echo $$((59092 + $${DRIFTWARDEN_PORT_OFFSET:-0})))

.PHONY: setup services stop test demo smoke bench clean

setup:
	scripts/bootstrap.sh

services: setup
	scripts/services.sh start

stop:
	scripts/services.sh stop

test: services
	$(PY) -m pytest $(PYTEST_ARGS)

demo: setup
	scripts/services.sh start kafka postgres prometheus
	$(VENV)/bin/driftwarden demo --bootstrap-servers $(KAFKA)

smoke: setup
	scripts/services.sh start kafka
	$(PY) -m driftwarden.jobs.smoke_job --topic smoke-$$(date +%s) --bootstrap-servers $(KAFKA) --produce 10000 --store-url sqlite:///$(CURDIR)/.run/smoke.db

bench: services
	$(PY) bench/run_all.py $(BENCH_ARGS)

clean:
	scripts/services.sh clean
	rm -rf .run
