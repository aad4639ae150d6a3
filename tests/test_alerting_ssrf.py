"""SSRF guard: a table of bad URLs is refused; good ones are pinned to the checked address."""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from driftwarden.alerting.ssrf import UnsafeURLError, check_url

PUBLIC = "93.184.216.34"


def fake_dns(table: dict[str, list[str]]):
    """A resolver answering from a table (IP literals resolve to themselves)."""
    def resolve(host: str, _port: int) -> list[str]:
        return table.get(host, [host])
    return resolve


DNS = fake_dns({
    "localhost": ["127.0.0.1", "::1"],
    "hooks.example.com": [PUBLIC],
    "internal.example.com": ["10.1.2.3"],
    "rebind.example.com": [PUBLIC, "127.0.0.1"],
    "metadata.example.com": ["169.254.169.254"],
    "v6loop.example.com": ["::1"],
})

BAD_URLS = [
    "file:///etc/passwd",
    "gopher://hooks.example.com/",
    "ftp://hooks.example.com/",
    "javascript:alert(1)",
    "hooks.example.com/no-scheme",
    "http://user:pass@hooks.example.com/",
    "https://token@hooks.example.com/",
    "http:///no-host",
    "http://127.0.0.1/",
    "http://localhost:8080/",
    "http://[::1]/",
    "http://0.0.0.0/",
    "http://[::]/",
    "http://10.0.0.1/",
    "http://172.16.5.4/",
    "http://192.168.1.1/",
    "http://169.254.169.254/latest/meta-data/",
    "http://[fe80::1]/",
    "http://[fc00::1]/",
    "http://224.0.0.1/",
    "http://[ff02::1]/",
    "http://100.64.0.1/",
    "http://240.0.0.1/",
    "http://255.255.255.255/",
    "http://[::ffff:127.0.0.1]/",
    "http://[::ffff:a9fe:a9fe]/",
    "http://[64:ff9b::a00:1]/",
    "http://[2002:7f00:1::]/",
    "http://2130706433/",
    "http://0x7f000001/",
    "http://0177.0.0.1/",
    "http://0x7f.0.0.1/",
    "http://127.1/",
    "http://017700000001/",
    "http://internal.example.com/hook",
    "http://rebind.example.com/hook",
    "http://metadata.example.com/",
    "http://v6loop.example.com/",
    "http://hooks.example.com:99999/",
    "http://hooks%2eexample.com/",
    "http://[fec0::1]/",
    "http://[feff::1]/",
    "http://exa\x00mple.com/",
    "http://hooks.example.com\x00.evil.com/",
    "http://hooks.example.com/\r\nX-Injected: 1",
    "http://hooks.exa\tmple.com/",
    "http://hooks.example.com/\x7f",
]


@pytest.mark.parametrize("url", BAD_URLS)
def test_bad_url_is_refused(url: str) -> None:
    with pytest.raises(UnsafeURLError):
        check_url(url, resolver=DNS)


@settings(max_examples=400, deadline=None)
@given(st.ip_addresses(v=4))
def test_any_ipv4_address_is_refused_exactly_when_it_is_not_global_unicast(ip: ipaddress.IPv4Address) -> None:
    """Across the whole IPv4 space (not just the table's points): the guard agrees with the stdlib."""
    url = f"http://{ip}/hook"
    if ip.is_global and not ip.is_multicast:
        assert check_url(url, resolver=DNS).ip == str(ip)
    else:
        with pytest.raises(UnsafeURLError):
            check_url(url, resolver=DNS)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(["::1/128", "fe80::/10", "fc00::/7", "ff00::/8", "::/128"]).flatmap(
    lambda net: st.ip_addresses(network=net)))
def test_any_non_global_ipv6_address_is_refused(ip: ipaddress.IPv6Address) -> None:
    with pytest.raises(UnsafeURLError):
        check_url(f"http://[{ip}]/hook", resolver=DNS)


@settings(max_examples=200, deadline=None)
@given(st.ip_addresses(v=4).filter(lambda ip: not ip.is_global))
def test_ipv6_forms_embedding_a_private_ipv4_address_are_refused(ip: ipaddress.IPv4Address) -> None:
    """IPv4-mapped, NAT64 and 6to4 forms of any non-global IPv4 address."""
    packed = int(ip)
    for v6 in (ipaddress.IPv6Address((0xFFFF << 32) | packed), ipaddress.IPv6Address((0x64FF9B << 96) | packed),
               ipaddress.IPv6Address((0x2002 << 112) | (packed << 80))):
        with pytest.raises(UnsafeURLError):
            check_url(f"http://[{v6}]/hook", resolver=DNS)


def test_public_url_is_pinned_to_the_checked_address() -> None:
    target = check_url("https://hooks.example.com/a/b?x=1", resolver=DNS)
    assert target.ip == PUBLIC
    assert target.pinned_url == f"https://{PUBLIC}:443/a/b?x=1"
    assert target.host_header == "hooks.example.com"
    assert check_url("http://hooks.example.com:8080/", resolver=DNS).host_header == "hooks.example.com:8080"


@pytest.mark.parametrize("url", ["http://127.0.0.1:9000/hook", "http://localhost/", "http://internal.example.com/",
                                 "http://[::1]:8080/"])
def test_allow_listed_route_may_reach_private_addresses(url: str) -> None:
    assert check_url(url, allow_private=True, resolver=DNS).ip


@pytest.mark.parametrize("url", ["http://224.0.0.1/", "http://0.0.0.0/", "http://2130706433/",
                                 "http://user:pw@127.0.0.1/", "file:///etc/passwd",
                                 "http://169.254.169.254/latest/meta-data/", "http://metadata.example.com/",
                                 "http://[fe80::1]/", "http://[fec0::1]/", "http://[::ffff:a9fe:a9fe]/",
                                 "http://[64:ff9b::a9fe:a9fe]/", "http://exa\x00mple.com/"])
def test_allow_list_does_not_open_everything(url: str) -> None:
    with pytest.raises(UnsafeURLError):
        check_url(url, allow_private=True, resolver=DNS)


def test_site_local_ipv6_is_refused_although_python_calls_it_global() -> None:
    import ipaddress

    from driftwarden.alerting.ssrf import forbidden_reason

    assert ipaddress.ip_address("fec0::1").is_global  # Python 3.11's view: why the guard checks it itself
    assert forbidden_reason(ipaddress.ip_address("fec0::1")) == "site-local"


@pytest.mark.parametrize("url,networks", [
    ("http://169.254.10.7/hook", ["169.254.10.0/24"]),
    ("http://metadata.example.com/", ["169.254.169.254/32"]),
    ("http://[fe80::1]:8080/", ["fe80::/64"]),
    ("http://10.1.2.3/", ["10.0.0.0/8"]),
])
def test_addresses_listed_explicitly_may_be_reached(url: str, networks: list[str]) -> None:
    assert check_url(url, resolver=DNS, allow_networks=networks).ip
    with pytest.raises(UnsafeURLError):
        check_url(url, resolver=DNS, allow_networks=["192.0.2.0/24"])


def test_a_listed_network_never_opens_multicast_or_unspecified() -> None:
    with pytest.raises(UnsafeURLError):
        check_url("http://224.0.0.1/", resolver=DNS, allow_networks=["224.0.0.0/4"])


def test_a_control_character_in_a_route_url_is_a_config_error_at_start_up() -> None:
    from driftwarden.alerting.rules import parse_rules
    from driftwarden.core.errors import ConfigError

    with pytest.raises(ConfigError, match="control character"):
        parse_rules({"routes": [{"name": "r", "url": "http://exa\x00mple.com/"}]})


def test_the_system_resolver_turns_a_bad_host_into_our_error() -> None:
    from driftwarden.alerting.ssrf import UnresolvableHostError, system_resolver

    with pytest.raises(UnresolvableHostError):
        system_resolver("exa\x00mple.com", 80)


@pytest.mark.parametrize("char", ["\x00", "\x01", "\x1f", "\x7f", "\x80", "\x85", "\x9f"],
                         ids=lambda c: f"U+{ord(c):04X}")
def test_any_control_character_in_a_host_is_a_config_error_at_start_up(char: str) -> None:
    """C0, DEL and C1 (Unicode category Cc): the resolver would refuse each at every attempt, retried for a day."""
    from driftwarden.alerting.rules import parse_rules
    from driftwarden.core.errors import ConfigError

    with pytest.raises(ConfigError, match="control character"):
        parse_rules({"routes": [{"name": "r", "url": f"http://exa{char}mple.com/"}]})


@pytest.mark.parametrize("host", ["a..b.example.com", "a" * 64 + ".example.com", "exa\u2028mple.com",
                                  "exa\u202emple.com"], ids=["empty-label", "long-label", "line-separator", "bidi"])
def test_a_host_name_no_resolver_can_look_up_is_a_config_error_at_start_up(host: str) -> None:
    from driftwarden.alerting.rules import parse_rules
    from driftwarden.alerting.ssrf import system_resolver
    from driftwarden.core.errors import ConfigError

    with pytest.raises(UnsafeURLError):  # what each delivery attempt would meet: retried until max_age_s
        system_resolver(host, 80)
    with pytest.raises(ConfigError, match="host name"):
        parse_rules({"routes": [{"name": "r", "url": f"http://{host}/"}]})


@pytest.mark.parametrize("url", ["https://bücher.example/hook", "http://my_host.internal:8080/", "http://[2001:db8::1]/",
                                 "https://" + "a" * 63 + ".example.com/"])
def test_unusual_but_valid_host_names_load(url: str) -> None:
    from driftwarden.alerting.rules import parse_rules

    assert parse_rules({"routes": [{"name": "r", "url": url}]}).routes[0].url == url
