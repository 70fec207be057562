"""report_model() with fake modules and parameters (objects with numel/element_size)."""

import pytest

import gpumem_client
from conftest import validate_report


class T:
    """A tensor-like object: numel() elements of element_size() bytes."""

    def __init__(self, numel, element_size=4, grad=None):
        self._n = numel
        self._e = element_size
        self.grad = grad

    def numel(self):
        return self._n

    def element_size(self):
        return self._e


class Model:
    def __init__(self, params):
        self._params = params

    def named_parameters(self):
        return iter(self._params)


class Optimizer:
    def __init__(self, state):
        self.state = state


@pytest.mark.parametrize(
    "name,component",
    [
        ("model.layers.0.self_attn.q_proj.weight", "attention"),
        ("model.layers.0.self_attn.o_proj.weight", "attention"),
        ("transformer.h.0.attn.c_attn.weight", "attention"),
        ("layers.0.attention.wqkv.weight", "attention"),
        ("blocks.3.qkv.bias", "attention"),
        ("model.layers.0.mlp.gate_proj.weight", "mlp"),
        ("model.layers.0.mlp.down_proj.weight", "mlp"),
        ("transformer.h.0.mlp.c_fc.weight", "mlp"),
        ("layers.1.feed_forward.w1.weight", "mlp"),
        ("encoder.layer.0.ffn.fc1.weight", "mlp"),
        ("model.embed_tokens.weight", "embedding"),
        ("transformer.wte.weight", "embedding"),
        ("transformer.wpe.weight", "embedding"),
        ("tok_embeddings.weight", "embedding"),
        ("lm_head.weight", "embedding"),
        ("model.norm.weight", "norm"),
        ("transformer.h.0.ln_1.weight", "norm"),
        ("transformer.ln_f.bias", "norm"),
        ("model.layers.0.input_layernorm.weight", "norm"),
        ("model.layers.0.post_attention_layernorm.weight", "norm"),
        ("encoder.layer.0.attention.output.LayerNorm.weight", "norm"),
        ("decoder.layers.0.self_attn_layer_norm.weight", "norm"),
        ("base_model.model.layers.0.self_attn.q_proj.lora_A.default.weight", "lora"),
        ("base_model.model.layers.0.mlp.up_proj.lora_B.default.weight", "lora"),
        ("base_model.model.layers.0.self_attn.q_proj.base_layer.weight", "attention"),
        ("classifier.weight", "other"),
        ("head.bias", "other"),
    ],
)
def test_classify(name, component):
    assert gpumem_client.classify(name) == component


def test_report_model_groups_parameters_gradients_and_optimizer_state(server, no_frameworks):
    q = T(100, 2, grad=T(100, 2))
    mlp = T(400, 4, grad=T(400, 4))
    emb = T(1000, 2)  # frozen: no gradient
    norm = T(10, 4, grad=T(10, 4))
    lora = T(16, 4, grad=T(16, 4))
    head = T(5, 4, grad=None)
    model = Model(
        [
            ("layers.0.self_attn.q_proj.weight", q),
            ("layers.0.mlp.fc1.weight", mlp),
            ("embed_tokens.weight", emb),
            ("layers.0.input_layernorm.weight", norm),
            ("layers.0.self_attn.q_proj.lora_A.weight", lora),
            ("score.weight", head),
        ]
    )
    # Adam-like state: two moments and a step counter per parameter
    state = {
        p: {"step": T(1, 4), "exp_avg": T(p.numel(), 4), "exp_avg_sq": T(p.numel(), 4)}
        for p in (q, mlp, norm, lora)
    }
    state[head] = {"step": 3}  # a non-tensor value counts nothing
    opt = Optimizer(state)

    client = gpumem_client.Client(socket=server.address)
    assert client.report_model(model, opt) is True  # no thread: sent at once
    (body,) = server.bodies
    validate_report(body)
    assert body["components"] == [
        {"component": "attention", "parameters_bytes": 200, "gradients_bytes": 200,
         "optimizer_bytes": 4 + 800},
        {"component": "mlp", "parameters_bytes": 1600, "gradients_bytes": 1600,
         "optimizer_bytes": 4 + 3200},
        {"component": "embedding", "parameters_bytes": 2000, "gradients_bytes": 0,
         "optimizer_bytes": 0},
        {"component": "norm", "parameters_bytes": 40, "gradients_bytes": 40,
         "optimizer_bytes": 4 + 80},
        {"component": "lora", "parameters_bytes": 64, "gradients_bytes": 64,
         "optimizer_bytes": 4 + 128},
        {"component": "other", "parameters_bytes": 20, "gradients_bytes": 0,
         "optimizer_bytes": 0},
    ]

    # later reports carry the latest list; a new call replaces it
    client.report_model(Model([("mlp.fc2.weight", T(8, 4))]))
    client.flush()
    later = server.bodies[1:]
    assert later[0]["components"] == [
        {"component": "mlp", "parameters_bytes": 32, "gradients_bytes": 0, "optimizer_bytes": 0}
    ]
    assert later[1]["components"] == later[0]["components"]


def test_sharded_parameters_count_the_local_shard(server, no_frameworks):
    class DTensor(T):
        def to_local(self):
            return T(self._n // 4, self._e)

    client = gpumem_client.Client(socket=server.address)
    client.report_model(Model([("attn.in_proj_weight", DTensor(400, 2))]))
    assert server.bodies[0]["components"][0]["parameters_bytes"] == 200


def test_report_model_never_raises(server, no_frameworks):
    client = gpumem_client.Client(socket=server.address)
    assert client.report_model(object()) is False  # no named_parameters
    assert client.report_model(Model([("w", object())]), Optimizer(None)) is True
    assert server.bodies[-1]["components"] == [
        {"component": "other", "parameters_bytes": 0, "gradients_bytes": 0, "optimizer_bytes": 0}
    ]


def test_report_model_with_thread_waits_for_the_next_report(server, no_frameworks):
    client = gpumem_client.start(interval=0.02, socket=server.address)
    gpumem_client.report_model(Model([("wte.weight", T(10, 2))]))
    # no devices here, but new components are worth a report
    assert server.wait_for(lambda reqs: len(reqs) >= 1)
    validate_report(server.bodies[0])
    assert server.bodies[0]["components"][0]["component"] == "embedding"
    import time

    time.sleep(0.1)
    assert len(server.requests) == 1  # and then nothing new to say without devices
    assert client.running
