# The project's fix, restated here (see ../train.py).
import torch


def validate(model, valid_loader, args):
    model.eval()
    total_loss = 0
    for i, (src, tgt, src_lengths, tgt_lengths) in enumerate(valid_loader):
        src, tgt = src.cuda(), tgt.cuda()
        with torch.no_grad():
            pred, gold, hyp = model(src, src_lengths, tgt, verbose=False)
        total_loss += torch.nn.functional.cross_entropy(pred.view(-1, pred.size(-1)), gold.view(-1)).item()
    return total_loss / len(valid_loader)
