"""The benchmark's Python reference point: a composition function that returns what it was given.

Served by crossplane-function-sdk-python's own runtime (grpc.aio, both v1 and v1beta1, reflection), plaintext,
as `crossplane render`'s Development runtime would reach it. Its cost is the SDK's: protobuf decoding in C,
copying desired state and context, encoding the response.
"""

import argparse

from crossplane.function import response, runtime
from crossplane.function.proto.v1 import run_function_pb2 as fnv1
from crossplane.function.proto.v1 import run_function_pb2_grpc as grpcv1


class NoopRunner(grpcv1.FunctionRunnerServiceServicer):
    async def RunFunction(
        self, req: fnv1.RunFunctionRequest, _: object
    ) -> fnv1.RunFunctionResponse:
        return response.to(req)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--address", default="0.0.0.0:9443")
    parser.add_argument("--insecure", action="store_true")
    args = parser.parse_args()
    # Fleet-sized requests pass gRPC's 4 MiB default receive limit only in the largest fleets; match our server.
    options = [("grpc.max_receive_message_length", 16 * 1024 * 1024)]
    runtime.serve(NoopRunner(), args.address, creds=None, insecure=args.insecure, options=options)


if __name__ == "__main__":
    main()
