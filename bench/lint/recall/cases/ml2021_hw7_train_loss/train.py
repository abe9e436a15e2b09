# recall case: pai4451/ML2021 (a course's HW7 TA example, question answering with BERT)
# bug: `train_loss += output.loss`, printed and reset every `logging_step` steps: between
#      resets every step's graph stays alive; host memory reached 64 GB
#      (https://github.com/pai4451/ML2021/issues/2); the fix in the thread is
#      `output.loss.detach()` / `.item()`.
# reproduction written here (the pattern, not the project's code).
# expect: OOM102
import torch


def train(model, loader, optimizer, logging_step=100):
    model.train()
    train_loss = 0
    for step, batch in enumerate(loader, 1):
        output = model(**batch)
        train_loss += output.loss  # bug
        output.loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        if step % logging_step == 0:
            print(f"step {step}: loss {train_loss.item() / logging_step:.3f}")
            train_loss = 0
