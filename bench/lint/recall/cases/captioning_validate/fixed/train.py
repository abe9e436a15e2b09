# The project's fix, restated here (see ../train.py).
import torch


def validate(val_loader, encoder, decoder, criterion, device):
    decoder.eval()
    encoder.eval()
    losses = 0.0
    for i, (imgs, caps, caplens) in enumerate(val_loader):
        with torch.no_grad():
            imgs = encoder(imgs.to(device))
            scores, caps_sorted, decode_lengths = decoder(imgs, caps.to(device), caplens)
        losses += criterion(scores, caps_sorted).item()
    return losses / len(val_loader)
