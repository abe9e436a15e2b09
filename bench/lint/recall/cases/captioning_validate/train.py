# recall case: sgrvinod/a-PyTorch-Tutorial-to-Image-Captioning, train.py (validate)
# bug: `validate()` runs the decoder after `.eval()` with gradients on: CUDA out of memory
#      at batch sizes that train fine
#      (https://github.com/sgrvinod/a-PyTorch-Tutorial-to-Image-Captioning/issues/57; the
#      author's fix puts the body under `with torch.no_grad():`).
# reproduction written here (the pattern, not the project's code).
# expect: OOM104
import torch


def validate(val_loader, encoder, decoder, criterion, device):
    decoder.eval()
    encoder.eval()
    losses = 0.0
    for i, (imgs, caps, caplens) in enumerate(val_loader):
        imgs = encoder(imgs.to(device))  # bug
        scores, caps_sorted, decode_lengths = decoder(imgs, caps.to(device), caplens)  # bug
        losses += criterion(scores, caps_sorted).item()
    return losses / len(val_loader)
