from rlctl.trainer import metric_reduce as mr


def test_means_are_exact_over_ranks_not_means_of_means():
    rank0 = {"critic/score": mr.partial_of([1.0, 1.0, 1.0])}
    rank1 = {"critic/score": mr.partial_of([0.0])}
    out = mr.finalize(mr.merge([rank0, rank1]), with_extremes=["critic/score"])
    assert out == {"critic/score/mean": 0.75, "critic/score/max": 1.0, "critic/score/min": 0.0}


def test_empty_partials_are_skipped():
    assert mr.finalize(mr.merge([{"x": mr.partial_of([])}])) == {}


def test_weighted_scalars():
    out = mr.finalize(
        mr.merge([{"loss": mr.scalar_partial(2.0, 3)}, {"loss": mr.scalar_partial(4.0, 1)}])
    )
    assert out == {"loss": 2.5}
