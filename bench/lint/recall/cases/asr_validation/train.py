# recall case: gentaiscool/end2end-asr-pytorch, trainer/asr/trainer.py (the validation loop)
# bug: validation after each epoch runs the model with gradients on and runs out of GPU
#      memory (https://github.com/gentaiscool/end2end-asr-pytorch/issues/29; the fix
#      adopted there wraps the validation loop in `with torch.no_grad():`).
# reproduction written here (the pattern, not the project's code).
# expect: OOM104
import torch


def validate(model, valid_loader, args):
    model.eval()
    total_loss = 0
    for i, (src, tgt, src_lengths, tgt_lengths) in enumerate(valid_loader):
        src, tgt = src.cuda(), tgt.cuda()
        pred, gold, hyp = model(src, src_lengths, tgt, verbose=False)  # bug
        total_loss += torch.nn.functional.cross_entropy(pred.view(-1, pred.size(-1)), gold.view(-1)).item()
    return total_loss / len(valid_loader)
