# recall case: facebookresearch/fairseq, fairseq/criterions/masked_lm.py (MaskedLmLoss.forward)
# bug: the criterion puts the loss tensor itself into `logging_output`, which the trainer
#      keeps for every step of a log interval: host memory grows while training
#      (https://github.com/facebookresearch/fairseq/issues/2255; fixed in commit 8eb9123,
#      which stores `loss.data`).
# reproduction written here (the pattern, not the project's code).
# expect: OOM101
import torch


class MaskedLmLoss:
    def __call__(self, model, sample):
        logits = model(**sample["net_input"])
        loss = torch.nn.functional.cross_entropy(logits.view(-1, logits.size(-1)), sample["target"].view(-1))
        logging_output = {"loss": loss, "ntokens": sample["ntokens"]}
        return loss, logging_output


def train(model, criterion, optimizer, batches):
    logging_outputs = []
    for sample in batches:
        loss, logging_output = criterion(model, sample)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        logging_outputs.append(logging_output)  # bug
    return logging_outputs
