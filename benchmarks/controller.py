"""Controller-scale benchmark: the same code as ``rlctl bench controller`` (see --help)."""

from rlctl.cli.bench_cmd import bench_app

if __name__ == "__main__":
    bench_app(["controller", *__import__("sys").argv[1:]])
