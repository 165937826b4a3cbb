"""A real gRPC client for sluice's tests: calls server.py's methods through TARGET (host:port) and
prints one line per call:
  unary <status> <reply> x-trailer=<value>
  stream <status> <count> <first>..<last> x-count=<value>
  fail <status> <details> x-reason=<value>
"""
import sys

import grpc


def trailer(call, key):
    for k, v in call.trailing_metadata() or ():
        if k == key:
            return v
    return "-"


def main():
    target = sys.argv[1]
    with grpc.insecure_channel(target) as channel:
        grpc.channel_ready_future(channel).result(timeout=10)
        say = channel.unary_unary("/sluice.test.Echo/Unary")
        reply, call = say.with_call(b"hello", timeout=10)
        print("unary %s %s x-trailer=%s" % (call.code().name, reply.decode(), trailer(call, "x-trailer")), flush=True)

        stream = channel.unary_stream("/sluice.test.Echo/Stream")
        call = stream(b"50", timeout=10)
        messages = [m.decode() for m in call]
        print("stream %s %d %s..%s x-count=%s" % (call.code().name, len(messages), messages[0].replace(" ", "_"),
                                                  messages[-1].replace(" ", "_"), trailer(call, "x-count")), flush=True)

        fail = channel.unary_unary("/sluice.test.Echo/Fail")
        try:
            fail.with_call(b"", timeout=10)
            print("fail OK - x-reason=-", flush=True)
        except grpc.RpcError as e:
            print("fail %s %s x-reason=%s" % (e.code().name, e.details().replace(" ", "_"), trailer(e, "x-reason")),
                  flush=True)


if __name__ == "__main__":
    sys.exit(main())
