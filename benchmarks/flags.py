"""Command-line flags that several benchmarks share, declared once."""


def add_rtt(parser, default=10.0):
    """--rtt: the round trip (ms) the delay proxy adds between Caffe and the Redis servers."""
    parser.add_argument("--rtt", type=float, default=default,
                        help=f"round trip the delay proxy adds between Caffe and the servers, ms (default {default:g})")
