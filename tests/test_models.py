"""The stock nets load in pycaffe with the parameter counts the paper states."""
import pytest

from data_prep import backends, datasets


def load(dataset, tmp_path, body=None):
    import caffe
    from caffe import layers as L
    from models.nets import net_proto, count_params
    caffe.set_mode_cpu()
    model = dataset.model
    if dataset.fits_in_memory:
        data = backends.get("pymem").data_layer(None, dataset, None)
    else:
        def data(batch, phase):
            return L.DummyData(shape=[dict(dim=[2, *model.input_shape]), dict(dim=[2])], ntop=2)
    if body:
        model = type(model)(**{**model.__dict__, "body": body})
    path = tmp_path / f"check_{model.name}.prototxt"
    path.write_text(str(net_proto(model, data, caffe.TRAIN)))
    return count_params(caffe.Net(str(path), caffe.TRAIN))


@pytest.mark.parametrize("dataset,count", [("mnist", 431_080), ("cifar10", 145_578), ("imagenet", 60_965_224)])
def test_stock_net_parameter_counts(dataset, count, tmp_path):
    ds = datasets.get(dataset)
    assert ds.model.params == count
    assert load(ds, tmp_path) == count


def test_caffenet_ungrouped_has_the_papers_count(tmp_path):
    """The paper's 62,378,344 is CaffeNet without the group: 2 split of conv2/4/5."""
    from models.nets import caffenet_body
    ds = datasets.get("imagenet")
    assert load(ds, tmp_path, lambda n, d: caffenet_body(n, d, group=1)) == ds.model.paper_params == 62_378_344


def test_solvers_follow_the_stock_schedules():
    from models.nets import MODELS, solver_text
    text = solver_text(MODELS["cifar10_quick"], "a", "b", "s", gpu=True)
    assert 'lr_policy: "multistep"' in text and "stepvalue: 4000" in text and "max_iter: 5000" in text
    text = solver_text(MODELS["lenet"], "a", "b", "s", gpu=False)
    assert 'lr_policy: "inv"' in text and "max_iter: 10000" in text and "solver_mode: CPU" in text
    assert "max_iter: 15000" in solver_text(MODELS["caffenet"], "a", "b", "s", gpu=True)


def test_every_dataset_names_a_net_and_every_backend_knows_what_it_supports():
    for ds in datasets.REGISTRY.values():
        assert ds.model.name == ds.net
        for b in backends.REGISTRY.values():
            reason = b.unsupported(ds)
            assert reason is None or len(reason) > 20  # a reason a user can read
