# recall case: RUCAIBox/RecBole, recbole/trainer/trainer.py (Trainer._train_epoch)
# bug: the loss of every batch is summed as a tensor (`total_loss = losses if total_loss
#      is None else total_loss + losses`), storing each batch's graph until the epoch
#      ends: out of memory (RUCAIBox/RecBole#307, which sums `losses.item()`).
# reproduction written here (the pattern, not the project's code); described in the PR title; the epoch loop is reconstructed.
# expect: OOM102


class Trainer:
    def __init__(self, model, optimizer):
        self.model = model
        self.optimizer = optimizer

    def _train_epoch(self, train_data, epoch_idx, loss_func=None):
        self.model.train()
        loss_func = loss_func or self.model.calculate_loss
        total_loss = None
        for batch_idx, interaction in enumerate(train_data):
            self.optimizer.zero_grad()
            losses = loss_func(interaction)
            if isinstance(losses, tuple):
                loss = sum(losses)
                loss_tuple = tuple(per_loss.item() for per_loss in losses)
                total_loss = loss_tuple if total_loss is None else tuple(map(sum, zip(total_loss, loss_tuple)))
            else:
                loss = losses
                total_loss = losses if total_loss is None else total_loss + losses  # bug
            loss.backward()
            self.optimizer.step()
        return total_loss
