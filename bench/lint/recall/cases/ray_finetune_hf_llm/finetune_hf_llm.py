# recall case: ray-project/ray, doc/source/templates/04_finetuning_llms_with_deepspeed/finetune_hf_llm.py
# bug: the loss of every step is summed with its graph (`loss_sum += loss`); the memory
#      leak of ray-project/ray#40714, fixed in ray-project/ray#40940 (`loss.item()`).
# reproduction written here (the pattern, not the project's code); the summing lines follow the diff quoted in the PR review; the rest is reduced.
# expect: OOM102
import torch
from accelerate import Accelerator
from transformers import AutoModelForCausalLM


def training_function(config):
    accelerator = Accelerator(mixed_precision="bf16")
    model = AutoModelForCausalLM.from_pretrained(config["model"], torch_dtype=torch.bfloat16)
    optimizer = torch.optim.AdamW(model.parameters(), lr=config["lr"])
    model, optimizer, train_dataloader = accelerator.prepare(
        model, optimizer, config["train_dataloader"]
    )
    for epoch in range(config["num_epochs"]):
        model.train()
        loss_sum = torch.tensor(0.0).to(accelerator.device)
        for step, batch in enumerate(train_dataloader):
            with accelerator.accumulate(model):
                outputs = model(**batch)
                loss = outputs.loss
                loss_sum += loss  # bug
                accelerator.backward(loss)
                optimizer.step()
                optimizer.zero_grad()
        accelerator.print(f"epoch {epoch}: {loss_sum.item() / (step + 1)}")
