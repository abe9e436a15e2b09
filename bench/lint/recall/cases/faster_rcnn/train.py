# recall case: bubbliiiing/faster-rcnn-pytorch, train.py (fit_ont_epoch)
# bug: the losses returned by the trainer's `train_step` (after `backward()`) are summed
#      as tensors (`total_loss += total` ...), so every iteration's graph stays alive and
#      memory keeps growing; reported in bubbliiiing/faster-rcnn-pytorch#35, fixed by
#      summing `.item()`s.
# reproduction written here (the pattern, not the project's code); the five `+=` lines follow the issue; the loop and the trainer are reduced.
# expect: OOM102
from nets.frcnn_training import FasterRCNNTrainer


def fit_one_epoch(net, train_util, epoch, epoch_size, gen):
    total_loss = 0
    rpn_loc_loss = 0
    rpn_cls_loss = 0
    roi_loc_loss = 0
    roi_cls_loss = 0
    for iteration, batch in enumerate(gen):
        if iteration >= epoch_size:
            break
        imgs, boxes, labels = batch
        losses = train_util.train_step(imgs, boxes, labels, 1)
        rpn_loc, rpn_cls, roi_loc, roi_cls, total = losses
        total_loss += total  # bug
        rpn_loc_loss += rpn_loc
        rpn_cls_loss += rpn_cls
        roi_loc_loss += roi_loc
        roi_cls_loss += roi_cls
    return total_loss / (iteration + 1)


def main(model, optimizer, gen, epochs, epoch_size):
    train_util = FasterRCNNTrainer(model, optimizer)
    for epoch in range(epochs):
        fit_one_epoch(model, train_util, epoch, epoch_size, gen)
