# The project's fix, restated here (see ../train.py).
import torch


def optimize(tensors, loss_function, optimizer=torch.optim.Adam, tol=1e-4, max_iter=1e4):
    optimizer = optimizer(tensors)
    loss_history = []
    iter = 0
    while True:
        optimizer.zero_grad()
        loss = loss_function(*tensors)
        loss.backward()
        optimizer.step()
        loss_history.append(loss.item())
        iter += 1
        if iter >= max_iter or (len(loss_history) > 1 and abs(loss_history[-1] - loss_history[-2]) < tol):
            break
    return loss_history
