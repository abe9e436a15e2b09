# recall case: rballester/tntorch, tntorch/gradient.py (optimize)
# bug: `loss_history` keeps every iteration's loss with its whole graph: "in 1000
#      iterations it froze a PC with 12 GB RAM" (https://github.com/rballester/tntorch/pull/19,
#      merged).
# reproduction written here (the pattern, not the project's code).
# expect: OOM101
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
        loss_history.append(loss)  # bug
        iter += 1
        if iter >= max_iter or (len(loss_history) > 1 and abs(loss_history[-1] - loss_history[-2]) < tol):
            break
    return loss_history
