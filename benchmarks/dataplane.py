"""Data-plane benchmark: the same code as ``rlctl bench dataplane`` (see --help)."""

from rlctl.cli.bench_cmd import bench_app

if __name__ == "__main__":
    bench_app(["dataplane", *__import__("sys").argv[1:]])
