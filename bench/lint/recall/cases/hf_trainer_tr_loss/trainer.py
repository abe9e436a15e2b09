# recall case: huggingface/transformers, src/transformers/trainer.py (Trainer.train)
# bug: `tr_loss += self.training_step(model, inputs)` where `training_step` returns the
#      backpropagated loss without `.detach()`/`.item()`: every step's graph is kept
#      (transformers#6939: all 12 GB of RAM used after ~20 000 steps); fixed in
#      huggingface/transformers#6999 (a detached loss).
# reproduction written here (the pattern, not the project's code); the `+=` line and the helper's shape follow the issue and PR; reduced.
# expect: OOM102
import torch


class Trainer:
    def __init__(self, model, optimizer, train_dataloader, args):
        self.model = model
        self.optimizer = optimizer
        self.train_dataloader = train_dataloader
        self.args = args

    def training_step(self, model, inputs):
        model.train()
        outputs = model(**inputs)
        loss = outputs[0]
        if self.args.gradient_accumulation_steps > 1:
            loss = loss / self.args.gradient_accumulation_steps
        loss.backward()
        return loss

    def train(self):
        model = self.model
        tr_loss = torch.tensor(0.0)
        for epoch in range(int(self.args.num_train_epochs)):
            for step, inputs in enumerate(self.train_dataloader):
                tr_loss += self.training_step(model, inputs)  # bug
                if (step + 1) % self.args.gradient_accumulation_steps == 0:
                    self.optimizer.step()
                    model.zero_grad()
        return tr_loss.item()
