"""Calls grpc.health.v1.Health/Check until the server refuses, as any gRPC client would.

Usage: python3 health_client.py HOST:PORT [MAX_CALLS]

Prints one line per call: "ok <serving status>" for an answer; for the refusal, which
ends the run, "status <code name>", "details <message>" and one "trailer <key> <value>"
per trailing metadata entry. Exits 1 if no call was refused within MAX_CALLS (default 10),
and 3 if grpcio or grpcio-health-checking is missing (tests/grpc_client.rs installs them
into a virtual environment of its own when python3 lacks them).
"""

import sys

try:
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc
except ImportError as e:
    print(
        f"{e}: this client needs the Python packages grpcio and grpcio-health-checking "
        "(pip install grpcio grpcio-health-checking)",
        file=sys.stderr,
    )
    sys.exit(3)


def main() -> int:
    target = sys.argv[1]
    max_calls = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    with grpc.insecure_channel(target) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        for _ in range(max_calls):
            try:
                reply = stub.Check(health_pb2.HealthCheckRequest(), timeout=30)
            except grpc.RpcError as refused:
                print(f"status {refused.code().name}")
                print(f"details {refused.details()}")
                for key, value in refused.trailing_metadata() or ():
                    print(f"trailer {key} {value}")
                return 0
            status = health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)
            print(f"ok {status}")
    print(f"no call refused in {max_calls}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
