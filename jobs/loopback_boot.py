"""PyFlink's Python worker boot for loopback mode, without Apache Beam's imports.

An embedded job (``driftwarden run``, the tests, the benches) runs its Python functions in
"loopback" mode: the Flink JVM starts one boot process per Python operator, and that process only
asks the client process to run the worker (gRPC ``BeamFnExternalWorkerPool/StartWorker``, which
returns when the worker ends). PyFlink's own boot (``pyflink.fn_execution.beam.beam_boot``)
imports Beam's protobuf modules for that one call: about 125 MiB resident per process, idle for
the whole job. This boot sends the same request with gRPC alone (about 32 MiB resident), the request's
protobuf bytes written here (``start_worker_request``; tests/test_loopback_boot.py reads them
back with Beam's own message classes).

Run as a script (``jobs/flink_env.worker_launcher`` starts it), standard library and ``grpc`` only:
it must not import the driftwarden packages or Beam.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from typing import Mapping

START_WORKER = "/org.apache.beam.model.fn_execution.v1.BeamFnExternalWorkerPool/StartWorker"
LOOPBACK_ADDRESS = "PYTHON_LOOPBACK_SERVER_ADDRESS"
#: Variables that only configure the gateway JVM's start (``jobs/flink_env._start_gateway_with_heap`` sets
#: them for that start alone). The worker pool copies the request's params into the client's environment:
#: sent, they would stay there after the job, and a process the client starts later (a second
#: ``driftwarden`` command) would take the client's heap, log folder, JDK logging and temporary folder.
GATEWAY_START_VARIABLES = ("JVM_ARGS", "FLINK_LOG_DIR", "LOG4J_PROPERTIES")


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        low, value = value & 0x7F, value >> 7
        if not value:
            out.append(low)
            return bytes(out)
        out.append(low | 0x80)


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field (string or message)."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def start_worker_request(worker_id: str, provision_endpoint: str, params: Mapping[str, str]) -> bytes:
    """Protobuf bytes of Beam's ``StartWorkerRequest``: worker_id (1), provision_endpoint (5,
    an ``ApiServiceDescriptor`` with its url, 1) and params (10, a map<string, string>)."""
    out = _field(1, worker_id.encode()) + _field(5, _field(1, provision_endpoint.encode()))
    for key, value in params.items():
        out += _field(10, _field(1, key.encode()) + _field(2, value.encode()))
    return out


def start_worker_error(response: bytes) -> str:
    """The ``error`` (field 1) of Beam's ``StartWorkerResponse`` bytes; "" when there is none."""
    error, i = "", 0
    while i < len(response):
        key, i = _read_varint(response, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            _, i = _read_varint(response, i)
        elif wire == 1:
            i += 8
        elif wire == 5:
            i += 4
        elif wire == 2:
            length, i = _read_varint(response, i)
            if number == 1:
                error = response[i:i + length].decode(errors="replace")
            i += length
        else:
            raise ValueError(f"StartWorkerResponse: unknown protobuf wire type {wire}")
    if i != len(response):
        raise ValueError("StartWorkerResponse: truncated")
    return error


def _read_varint(data: bytes, i: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        if i >= len(data):
            raise ValueError("StartWorkerResponse: truncated")
        byte = data[i]
        value |= (byte & 0x7F) << shift
        i, shift = i + 1, shift + 7
        if not byte & 0x80:
            return value, i


def worker_environment(jvm_environment: Mapping[str, str]) -> dict[str, str]:
    """The environment sent to the client's worker pool: the JVM's, less :data:`GATEWAY_START_VARIABLES`."""
    return {name: value for name, value in jvm_environment.items() if name not in GATEWAY_START_VARIABLES}


def main(argv: list[str]) -> None:
    """Ask the client's loopback worker pool to run this worker; return when the worker ends."""
    import grpc

    logging.basicConfig(stream=sys.stdout, level=logging.INFO)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--id", default="", help="worker id (required)")
    parser.add_argument("--provision_endpoint", default="", help="provision endpoint (required)")
    parser.add_argument("--semi_persist_dir", default="/tmp", help="semi-persistent folder")
    args = parser.parse_known_args(argv)[0]
    if not args.id or not args.provision_endpoint or LOOPBACK_ADDRESS not in os.environ:
        sys.exit(f"loopback boot needs --id, --provision_endpoint and ${LOOPBACK_ADDRESS} (got {argv})")
    logging.info("Starting up Python harness in loopback mode (driftwarden's boot): %s", " ".join(argv))
    params = {**worker_environment(os.environ), "SEMI_PERSISTENT_DIRECTORY": args.semi_persist_dir}
    with grpc.insecure_channel(os.environ[LOOPBACK_ADDRESS]) as channel:
        response = channel.unary_unary(START_WORKER)(start_worker_request(args.id, args.provision_endpoint, params))
    error = start_worker_error(response)
    if error:
        raise RuntimeError(f"Error starting worker: {error}")


if __name__ == "__main__":
    main(sys.argv[1:])
