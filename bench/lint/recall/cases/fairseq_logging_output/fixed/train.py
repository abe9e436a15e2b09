# The project's fix, restated here (see ../train.py).
import torch


class MaskedLmLoss:
    def __call__(self, model, sample):
        logits = model(**sample["net_input"])
        loss = torch.nn.functional.cross_entropy(logits.view(-1, logits.size(-1)), sample["target"].view(-1))
        logging_output = {"loss": loss.data, "ntokens": sample["ntokens"]}
        return loss, logging_output


def train(model, criterion, optimizer, batches):
    logging_outputs = []
    for sample in batches:
        loss, logging_output = criterion(model, sample)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        logging_outputs.append(logging_output)
    return logging_outputs
