"""Calls floodwall-rls as any Python program would: grpcio with the gRPC team's generated
code for Envoy's API (the xds-protos package), envoy.service.ratelimit.v3.

Usage: python3 rls_client.py HOST:PORT SCENARIO

Sends the scenario's requests (domain "py", see SCENARIOS) one after another and prints
one JSON array: for each answer, its overall code, each descriptor's status and the
response headers, enum values by their names. crates/floodwall-rls/tests/binary/python.rs
runs it against the binary and asserts the figures. Exits 2 on an unknown scenario, 3 if
grpcio or xds-protos is missing, and 4 if a call fails (its gRPC status on stderr).
"""

import json
import sys

try:
    import grpc
    from envoy.extensions.common.ratelimit.v3 import ratelimit_pb2
    from envoy.service.ratelimit.v3 import rls_pb2, rls_pb2_grpc
    from google.protobuf import wrappers_pb2
except ImportError as e:
    print(
        f"{e}: this client needs the Python packages grpcio and xds-protos "
        "(pip install grpcio xds-protos)",
        file=sys.stderr,
    )
    sys.exit(3)

Code = rls_pb2.RateLimitResponse.Code
Unit = rls_pb2.RateLimitResponse.RateLimit.Unit


def descriptor(*entries, hits_addend=None):
    """A descriptor of (key, value) entries, with its own cost when hits_addend is set."""
    d = ratelimit_pb2.RateLimitDescriptor(
        entries=[
            ratelimit_pb2.RateLimitDescriptor.Entry(key=k, value=v) for k, v in entries
        ]
    )
    if hits_addend is not None:
        d.hits_addend.CopyFrom(wrappers_pb2.UInt64Value(value=hits_addend))
    return d


def request(*descriptors, hits_addend=0):
    """A request of domain "py" for these descriptors, of cost hits_addend (0 means 1)."""
    return rls_pb2.RateLimitRequest(
        domain="py", descriptors=list(descriptors), hits_addend=hits_addend
    )


def repeat(n, *descriptors):
    return [request(*descriptors) for _ in range(n)]


# Each scenario's requests, in order. The test's configuration (python.rs) limits `user`
# to 3 a day (name per_user), `tenant` to 5 a day, `bytes` to 10 a day, `api_key` and then
# `plan: gold` to 5 an hour and any other `plan` to 2 an hour; `path: /healthz` is
# unlimited and `path: /search` 2 a day in shadow mode.
SCENARIOS = {
    # 4 of one user's quota of 3, then another user.
    "quota": lambda: repeat(4, descriptor(("user", "alice")))
    + [request(descriptor(("user", "bob")))],
    # The nested limits: gold, another plan, gold again, and api_key without a plan.
    "nested": lambda: [
        request(descriptor(("api_key", "k1"), ("plan", "gold"))),
        request(descriptor(("api_key", "k1"), ("plan", "silver"))),
        request(descriptor(("api_key", "k1"), ("plan", "gold"))),
        request(descriptor(("api_key", "k1"))),
    ],
    # Costs: the request's, a descriptor's own over the request's, one too high, a read
    # (0), the last unit, and two descriptors of different costs in one request.
    "hits_addend": lambda: [
        request(descriptor(("bytes", "b1")), hits_addend=4),
        request(descriptor(("bytes", "b1"), hits_addend=5), hits_addend=2),
        request(descriptor(("bytes", "b1")), hits_addend=2),
        request(descriptor(("bytes", "b1"), hits_addend=0)),
        request(descriptor(("bytes", "b1"), hits_addend=1)),
        request(
            descriptor(("bytes", "b2")),
            descriptor(("bytes", "b3"), hits_addend=7),
            hits_addend=3,
        ),
    ],
    "unlimited": lambda: repeat(3, descriptor(("path", "/healthz"))),
    # Shadow mode alone, then beside a counted limit that it does not refuse.
    "shadow": lambda: repeat(4, descriptor(("path", "/search")))
    + [request(descriptor(("path", "/search")), descriptor(("user", "carol")))],
    # A tenant charged once; a user exhausted; both in one request (refused); the tenant
    # alone again.
    "all_or_nothing": lambda: [request(descriptor(("tenant", "t1")))]
    + repeat(3, descriptor(("user", "dave")))
    + [
        request(descriptor(("tenant", "t1")), descriptor(("user", "dave"))),
        request(descriptor(("tenant", "t1"))),
    ],
    # Run with --response-headers: within the quota, two limits at once, over it.
    "headers": lambda: repeat(3, descriptor(("user", "erin")))
    + [
        request(descriptor(("tenant", "t2")), descriptor(("path", "/healthz"))),
        request(descriptor(("user", "erin"))),
    ],
}


def summary(response):
    """An answer as JSON-ready values: what the test asserts."""
    statuses = []
    for status in response.statuses:
        limit = None
        if status.HasField("current_limit"):
            limit = {
                "name": status.current_limit.name,
                "requests_per_unit": status.current_limit.requests_per_unit,
                "unit": Unit.Name(status.current_limit.unit),
            }
        reset = None
        if status.HasField("duration_until_reset"):
            d = status.duration_until_reset
            reset = {"seconds": d.seconds, "nanos": d.nanos}
        statuses.append(
            {
                "code": Code.Name(status.code),
                "current_limit": limit,
                "limit_remaining": status.limit_remaining,
                "duration_until_reset": reset,
            }
        )
    return {
        "overall_code": Code.Name(response.overall_code),
        "statuses": statuses,
        "headers": [[h.key, h.value] for h in response.response_headers_to_add],
    }


def main() -> int:
    target, scenario = sys.argv[1], sys.argv[2]
    if scenario not in SCENARIOS:
        print(f"no scenario {scenario!r}; known: {', '.join(SCENARIOS)}", file=sys.stderr)
        return 2
    answers = []
    with grpc.insecure_channel(target) as channel:
        stub = rls_pb2_grpc.RateLimitServiceStub(channel)
        for req in SCENARIOS[scenario]():
            try:
                answers.append(summary(stub.ShouldRateLimit(req, timeout=30)))
            except grpc.RpcError as failed:
                print(f"{failed.code().name}: {failed.details()}", file=sys.stderr)
                return 4
    print(json.dumps(answers))
    return 0


if __name__ == "__main__":
    sys.exit(main())
