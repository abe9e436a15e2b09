# recall case: samuelyu2002/ImVisible, train.py
# bug: training and validation sum `loss`, `MSE` and `cross_entropy` tensors
#      (`running_loss += loss` ...), storing their graphs and exhausting RAM; the
#      maintainer's answer in samuelyu2002/ImVisible#2 (lines 97-99 and 165-167) is
#      `+= loss.item()`, committed afterwards.
# reproduction written here (the pattern, not the project's code); the running sums follow the issue; the model and data are reduced.
# expect: OOM102
import torch
import torch.nn as nn


def train(model, train_loader, val_loader, optimizer, epochs, device):
    criterion_mse = nn.MSELoss()
    criterion_ce = nn.CrossEntropyLoss()
    for epoch in range(epochs):
        model.train()
        running_loss = 0.0
        running_loss_MSE = 0.0
        running_loss_cross_entropy = 0.0
        for images, points, labels in train_loader:
            images, points, labels = images.to(device), points.to(device), labels.to(device)
            optimizer.zero_grad()
            pred_points, pred_labels = model(images)
            MSE = criterion_mse(pred_points, points)
            cross_entropy = criterion_ce(pred_labels, labels)
            loss = MSE + cross_entropy
            loss.backward()
            optimizer.step()
            running_loss += loss  # bug
            running_loss_MSE += MSE
            running_loss_cross_entropy += cross_entropy
        print(epoch, running_loss / len(train_loader))
