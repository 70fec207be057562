"""Model memory by component: parameters, gradients and optimizer state."""

from typing import Any, Dict, List, Optional

COMPONENTS = ("attention", "mlp", "embedding", "norm", "lora", "other")

# Checked from the innermost part of a parameter's dotted name outwards; within one part the
# first rule that matches wins (so "post_attention_layernorm" is a norm, not attention).
_RULES = (
    ("norm", ("norm", "ln_")),
    ("embedding", ("embed", "wte", "wpe", "tok_embeddings", "lm_head")),
    (
        "attention",
        ("attn", "attention", "q_proj", "k_proj", "v_proj", "o_proj", "qkv", "self_attn"),
    ),
    (
        "mlp",
        (
            "mlp",
            "ffn",
            "fc1",
            "fc2",
            "gate_proj",
            "up_proj",
            "down_proj",
            "feed_forward",
            "experts",
            "moe",
        ),
    ),
)


def classify(name: str) -> str:
    """The component of a parameter from its name in ``model.named_parameters()``."""
    low = str(name).lower()
    if "lora_" in low:
        return "lora"
    for part in reversed(low.split(".")):
        for component, keys in _RULES:
            for key in keys:
                if key in part:
                    return component
    return "other"


def tensor_bytes(t: Any) -> int:
    """Bytes of a tensor-like object (numel() * element_size()); 0 for anything else."""
    if t is None:
        return 0
    to_local = getattr(t, "to_local", None)
    if to_local is not None:  # a sharded DTensor: count the shard this process holds
        try:
            t = to_local()
        except Exception:
            pass
    numel = getattr(t, "numel", None)
    element_size = getattr(t, "element_size", None)
    if not callable(numel) or not callable(element_size):
        return 0
    try:
        return max(0, int(numel()) * int(element_size()))
    except Exception:
        return 0


def model_components(model: Any, optimizer: Optional[Any] = None) -> List[Dict[str, Any]]:
    """The ``components`` list of a report for ``model`` (and ``optimizer``'s state)."""
    totals = {}  # type: Dict[str, List[int]]
    params = list(model.named_parameters())
    for name, p in params:
        t = totals.setdefault(classify(name), [0, 0, 0])
        t[0] += tensor_bytes(p)
        t[1] += tensor_bytes(getattr(p, "grad", None))
    if optimizer is not None:
        state = getattr(optimizer, "state", None)
        if state is not None:
            getter = getattr(state, "get", None)
            for name, p in params:
                try:
                    per_param = getter(p) if getter is not None else state[p]
                except (KeyError, TypeError):
                    per_param = None
                if not per_param:
                    continue
                values = per_param.values() if hasattr(per_param, "values") else per_param
                t = totals[classify(name)]
                for v in values:
                    t[2] += tensor_bytes(v)
    out = []
    for component in COMPONENTS:
        if component in totals:
            p, g, o = totals[component]
            out.append(
                {
                    "component": component,
                    "parameters_bytes": p,
                    "gradients_bytes": g,
                    "optimizer_bytes": o,
                }
            )
    return out
