# recall case: verl-project/verl, the Megatron actor's forward step
# bug: the per-micro-batch `model_output` dict returned to Megatron's pipeline schedule is
#      kept in `forward_data_store` until the mini-batch ends, with its graph, so
#      residency grows with the number of micro-batches
#      (https://github.com/verl-project/verl/pull/7874, merged: detach it).
# reproduction written here (the pattern, not the project's code).
# expect: OOM101
import torch


def forward_backward_batch(model, micro_batches, loss_fn):
    forward_data_store = []
    for micro_batch in micro_batches:
        logits = model(micro_batch["input_ids"])
        loss = loss_fn(logits, micro_batch["labels"])
        loss.backward()
        model_output = {"log_probs": logits.log_softmax(-1), "loss": loss}
        forward_data_store.append(model_output)  # bug
    return forward_data_store
