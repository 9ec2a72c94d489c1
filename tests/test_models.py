"""The stock nets load in pycaffe with the parameter counts the paper states."""
import pytest

from conftest import ROOT


def load(model, body=None):
    import caffe
    from models.nets import net_proto, count_params
    from data_prep.backends.memory import memory_layer
    from caffe import layers as L
    caffe.set_mode_cpu()
    if model.dataset == "imagenet":
        def data(batch, phase):
            return L.DummyData(shape=[dict(dim=[2, 3, 227, 227]), dict(dim=[2])], ntop=2)
    else:
        data = memory_layer(model)
    if body:
        model = type(model)(**{**model.__dict__, "body": body})
    path = ROOT / ".build" / f"check_{model.name}.prototxt"
    path.write_text(str(net_proto(model, data, caffe.TRAIN)))
    return count_params(caffe.Net(str(path), caffe.TRAIN))


@pytest.mark.parametrize("dataset,count", [("mnist", 431_080), ("cifar10", 145_578), ("imagenet", 60_965_224)])
def test_stock_net_parameter_counts(dataset, count):
    from models.nets import MODELS
    assert MODELS[dataset].params == count
    assert load(MODELS[dataset]) == count


def test_caffenet_ungrouped_has_the_papers_count():
    """The paper's 62,378,344 is CaffeNet without the group: 2 split of conv2/4/5."""
    from models.nets import MODELS, caffenet_body
    model = MODELS["imagenet"]
    assert load(model, lambda n, d: caffenet_body(n, d, group=1)) == model.paper_params == 62_378_344


def test_solvers_follow_the_stock_schedules():
    from models.nets import MODELS, solver_text
    text = solver_text(MODELS["cifar10"], "a", "b", "s", gpu=True)
    assert 'lr_policy: "multistep"' in text and "stepvalue: 4000" in text and "max_iter: 5000" in text
    text = solver_text(MODELS["mnist"], "a", "b", "s", gpu=False)
    assert 'lr_policy: "inv"' in text and "max_iter: 10000" in text and "solver_mode: CPU" in text
    assert "max_iter: 15000" in solver_text(MODELS["imagenet"], "a", "b", "s", gpu=True)
