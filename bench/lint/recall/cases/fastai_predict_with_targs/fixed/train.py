# The project's fix, restated here (see ../train.py).
import torch


def predict_with_targs_(m, dl):
    m.eval()
    res = []
    with torch.no_grad():
        for x, y in dl:
            res.append([m(x.cuda()).cpu().numpy(), y.numpy()])
    return res
