"""The private services of the fault suite start on ports that are free (bench/fault_harness.fault_port_offset).

Their ports lie in Linux's ephemeral range: a client connection of the suite can hold one when they start mid-run
(PostgreSQL once failed to start on its port so held). The holder here is a real socket bound as a client's is.
"""

from __future__ import annotations

import socket

from bench.fault_harness import FAULT_OFFSET_ENV, OFFSET_STEP, fault_port_offset, port_free, service_ports

CALLER_OFFSET = 3100  # the private offsets tried start at 3600: nothing else of the suite's lies there


def test_an_offset_with_a_port_held_by_a_client_is_passed_over(monkeypatch) -> None:
    monkeypatch.delenv(FAULT_OFFSET_ENV, raising=False)
    monkeypatch.setenv("DRIFTWARDEN_PORT_OFFSET", str(CALLER_OFFSET))
    first = CALLER_OFFSET + 500
    assert all(port_free(port + first) for port in service_ports()), "the test's ports are taken: choose another offset"
    assert fault_port_offset() == first
    with socket.socket() as client:  # a client's socket: bound without SO_REUSEADDR, as connect() binds one
        client.bind(("127.0.0.1", 55432 + first))
        assert not port_free(55432 + first)
        chosen = fault_port_offset()
    assert chosen == first + OFFSET_STEP
    assert all(port_free(port + chosen) for port in service_ports())


def test_the_offset_named_in_the_environment_wins(monkeypatch) -> None:
    monkeypatch.setenv(FAULT_OFFSET_ENV, "1234")
    assert fault_port_offset() == 1234


def test_the_ports_are_the_ones_services_sh_starts_its_services_on(monkeypatch) -> None:
    """service_ports reads scripts/services.sh's own table, at offset 0 whatever the caller's offset."""
    monkeypatch.setenv("DRIFTWARDEN_PORT_OFFSET", "700")
    service_ports.cache_clear()
    ports = service_ports()
    assert len(ports) == len(set(ports)) == 14
    assert {59092, 55432, 58081, 59090, 59098, 59250, 59252} <= set(ports)
